package naming

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("5.14.0-284.30.1.el9_2.x86_64", 3)
	tests := map[string]struct {
		in       string
		want     string // empty: only check validity and the hash suffix
		distinct string // another input that must not give the same value
	}{
		"valid kernel kept":       {in: "5.14.0-284.30.1.el9_2.x86_64", want: "5.14.0-284.30.1.el9_2.x86_64"},
		"rt kernel plus sign":     {in: "4.18.0-305.rt7.72.el8.x86_64+rt", distinct: "4.18.0-305.rt7.72.el8.x86_64_rt"},
		"too long":                {in: long, distinct: long + "x"},
		"leading punctuation":     {in: "+weird", distinct: "weird"},
		"empty stays empty":       {in: "", want: ""},
		"only invalid becomes ok": {in: "+++", distinct: "++"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := LabelValue(tc.in)
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("LabelValue(%q) = %q: invalid: %v", tc.in, got, errs)
			}
			if tc.want != "" || tc.in == "" {
				if got != tc.want {
					t.Fatalf("LabelValue(%q) = %q, want %q", tc.in, got, tc.want)
				}
			}
			if tc.distinct != "" && LabelValue(tc.distinct) == got {
				t.Fatalf("LabelValue(%q) and LabelValue(%q) collide: %q", tc.in, tc.distinct, got)
			}
			if LabelValue(tc.in) != got {
				t.Fatal("not stable")
			}
		})
	}
}

func TestDNSLabel(t *testing.T) {
	tests := map[string]struct {
		parts []string
		want  string
	}{
		"short and valid kept": {parts: []string{"simple-kmod", "driver"}, want: "simple-kmod-driver"},
		"kernel cleaned":       {parts: []string{"simple-kmod", "5.14.0-284.30.1.el9_2.x86_64"}},
		"long cut":             {parts: []string{strings.Repeat("a", 60), "5.14.0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := DNSLabel(tc.parts...)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Fatalf("DNSLabel(%q) = %q: %v", tc.parts, got, errs)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("DNSLabel(%q) = %q, want %q", tc.parts, got, tc.want)
			}
			if tc.want == "" && !strings.HasSuffix(got, Hash(strings.Join(tc.parts, "-"))) {
				t.Fatalf("DNSLabel(%q) = %q: a changed name must end with the hash of the input", tc.parts, got)
			}
		})
	}
	for parts, want := range map[[2]string]string{
		{"simple-kmod", "5.14.0-284.el9.x86_64"}: "simple-kmod-5.14.0-284.el9.x86-64-",
		{"a", "6.1.0"}:                           "a-6.1.0",
		{"a", "x..y"}:                            "a-x-y-",
	} {
		got := DNSName(parts[0], parts[1])
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 || len(got) > 63 {
			t.Errorf("DNSName(%q) = %q: %v", parts, got, errs)
		}
		if !strings.HasPrefix(got, want) || (!strings.HasSuffix(want, "-") && got != want) {
			t.Errorf("DNSName(%q) = %q, want %q(+hash)", parts, got, want)
		}
	}
	// Kernels that differ only in a character the cleaning replaces still get different names.
	if DNSLabel("sr", "5.14.0-1.el9_2.x86_64") == DNSLabel("sr", "5.14.0-1.el9-2.x86-64") {
		t.Fatal("kernels differing in _ and - collide")
	}
}

func TestStateLabel(t *testing.T) {
	tests := map[string]struct {
		sr, state string
		want      string
	}{
		"short":           {sr: "simple-kmod", state: "1000-driver-container", want: "specialresource.openshift.io/state-simple-kmod-1000"},
		"long name fits":  {sr: strings.Repeat("n", 80), state: "0000-rbac"},
		"exactly at edge": {sr: strings.Repeat("n", 52), state: "0000", want: "specialresource.openshift.io/state-" + strings.Repeat("n", 52) + "-0000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := StateLabel(tc.sr, tc.state)
			if errs := validation.IsQualifiedName(got); len(errs) > 0 {
				t.Fatalf("StateLabel = %q: %v", got, errs)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("StateLabel = %q, want %q", got, tc.want)
			}
			if !strings.HasPrefix(got, StateLabelPrefix(tc.sr)) {
				t.Fatalf("%q does not start with StateLabelPrefix %q", got, StateLabelPrefix(tc.sr))
			}
		})
	}
	for key, want := range map[string]bool{
		StateLabel("a", "0000"):                   true,
		StateLabel("a-b", "0000"):                 false,
		StateLabel("ab", "1000"):                  false,
		"specialresource.openshift.io/state-a-00": false,
	} {
		if got := IsStateLabelOf(key, "a"); got != want {
			t.Errorf("IsStateLabelOf(%q, a) = %v, want %v", key, got, want)
		}
	}
}
