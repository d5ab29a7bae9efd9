package apitest

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestDiscoveryMatchesMetal3 checks what `kubectl api-resources` shows for metal3.io: resource
// names, kinds, scope, short names and which kinds have a status subresource.
func TestDiscoveryMatchesMetal3(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion(metal3.GroupVersion.String())
	if err != nil {
		t.Fatalf("discovering %s: %v", metal3.GroupVersion, err)
	}

	type resource struct {
		kind       string
		namespaced bool
		shortNames []string
		status     bool
	}
	want := map[string]resource{
		"baremetalhosts":         {"BareMetalHost", true, []string{"bmh", "bmhost"}, true},
		"hardwaredata":           {"HardwareData", true, []string{"hd"}, false},
		"preprovisioningimages":  {"PreprovisioningImage", true, []string{"ppimg"}, true},
		"hostfirmwaresettings":   {"HostFirmwareSettings", true, []string{"hfs"}, true},
		"firmwareschemas":        {"FirmwareSchema", true, nil, false},
		"hostfirmwarecomponents": {"HostFirmwareComponents", true, nil, true},
		"hostupdatepolicies":     {"HostUpdatePolicy", true, nil, false},
		"dataimages":             {"DataImage", true, nil, true},
		"bmceventsubscriptions":  {"BMCEventSubscription", true, []string{"bes", "bmcevent"}, true},
		"provisionings":          {"Provisioning", false, nil, true},
	}

	got := map[string]resource{}
	for _, r := range list.APIResources {
		if name, sub, ok := strings.Cut(r.Name, "/"); ok {
			if sub == "status" {
				e := got[name]
				e.status = true
				got[name] = e
			}
			continue
		}
		e := got[r.Name]
		e.kind, e.namespaced, e.shortNames = r.Kind, r.Namespaced, slices.Sorted(slices.Values(r.ShortNames))
		got[r.Name] = e
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("resource %s is not served", name)
		case g.kind != w.kind || g.namespaced != w.namespaced || g.status != w.status || !slices.Equal(g.shortNames, w.shortNames):
			t.Errorf("resource %s = %+v, want %+v", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected resource %s in %s", name, metal3.GroupVersion)
		}
	}
}
