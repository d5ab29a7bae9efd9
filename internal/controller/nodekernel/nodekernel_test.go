package nodekernel

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

func TestDesired(t *testing.T) {
	tests := map[string]struct {
		kernel string
		labels map[string]string
		want   string // "" with change: remove
		change bool
	}{
		"new node":                     {kernel: "5.14.0-284.el9.x86_64", want: "5.14.0-284.el9.x86_64", change: true},
		"already right":                {kernel: "5.14.0-284.el9.x86_64", labels: map[string]string{sro.KernelLabel: "5.14.0-284.el9.x86_64"}},
		"rebooted into another":        {kernel: "5.14.0-362.el9.x86_64", labels: map[string]string{sro.KernelLabel: "5.14.0-284.el9.x86_64"}, want: "5.14.0-362.el9.x86_64", change: true},
		"rt kernel made a valid value": {kernel: "4.18.0-305.rt7.72.el8.x86_64+rt", want: naming.LabelValue("4.18.0-305.rt7.72.el8.x86_64+rt"), change: true},
		"no kernel, no label":          {},
		"no kernel any more":           {labels: map[string]string{sro.KernelLabel: "x"}, change: true},
		"nfd label used":               {labels: map[string]string{sro.NFDKernelLabel: "6.1.0"}, want: "6.1.0", change: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}}
			n.Status.NodeInfo.KernelVersion = tc.kernel
			got, change := Desired(n)
			if change != tc.change {
				t.Fatalf("change %v, want %v", change, tc.change)
			}
			switch {
			case !change:
			case tc.want == "" && got != nil:
				t.Fatalf("want the label removed, got %q", *got)
			case tc.want != "" && (got == nil || *got != tc.want):
				t.Fatalf("got %v, want %q", got, tc.want)
			}
		})
	}
}
