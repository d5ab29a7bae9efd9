package recipe

import (
	"slices"
	"strings"
	"testing"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

func TestFieldsReferencing(t *testing.T) {
	for _, tc := range []struct {
		name, image string
		want        bool
	}{
		{"field", "r/d:{{.ClusterVersion}}", true},
		{"compared only", `r/d:{{ if eq .ClusterVersionMajorMinor "4.16" }}416-{{ end }}{{.KernelFullVersion}}`, true},
		{"from the root variable", "r/d:{{ with .SpecialResource }}{{ $.ClusterVersionMajorMinor }}{{ end }}", true},
		{"in an else branch", "r/d:{{ if .KernelFullVersion }}x{{ else }}{{ .ClusterVersion }}{{ end }}", true},
		{"in a parenthesised argument", `r/d:{{ printf "%s" (.ClusterVersion) }}`, true},
		{"in a range", "r/d:{{ range .ClusterVersion }}{{ end }}", true},
		{"other variables", "r/d:{{.KernelFullVersion}}-{{.OperatingSystemMajorMinor}}", false},
		{"a name that only starts alike", "r/d:{{.ClusterVersionX}}", false},
		{"no template", "r/d:ClusterVersion", false},
		{"broken template (the rendering reports it)", "r/d:{{ .ClusterVersion", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &sro.SpecialResource{Spec: sro.SpecialResourceSpec{DriverContainer: sro.SpecialResourceDriverContainer{
				Image:   tc.image,
				RunArgs: []sro.RunArg{{Name: "OCP", Value: "{{.ClusterVersion}}"}},
			}}}
			in := func(path string) bool { return !strings.Contains(path, "runArgs") }
			got, err := FieldsReferencing(sr, in, "ClusterVersion", "ClusterVersionMajorMinor")
			if err != nil {
				t.Fatal(err)
			}
			if found := slices.Contains(got, "spec.driverContainer.image"); found != tc.want || len(got) > 1 {
				t.Fatalf("%q: got %v, want the image field %t and nothing else", tc.image, got, tc.want)
			}
		})
	}
}
