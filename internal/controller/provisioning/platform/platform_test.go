package platform

import (
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func TestOf(t *testing.T) {
	infra := func(t configv1.PlatformType, topology configv1.TopologyMode) *configv1.Infrastructure {
		i := &configv1.Infrastructure{}
		i.Status.PlatformStatus = &configv1.PlatformStatus{Type: t}
		i.Status.ControlPlaneTopology = topology
		return i
	}
	legacy := &configv1.Infrastructure{}
	legacy.Status.Platform = configv1.BareMetalPlatformType //nolint:staticcheck // testing the fallback
	for name, tc := range map[string]struct {
		infra    *configv1.Infrastructure
		want     []metal3.ProvisioningNetwork
		external bool
	}{
		"bare metal":             {infra: infra(configv1.BareMetalPlatformType, ""), want: allModes},
		"none":                   {infra: infra(configv1.NonePlatformType, ""), want: allModes},
		"vSphere":                {infra: infra(configv1.VSpherePlatformType, ""), want: disabledOnly},
		"OpenStack":              {infra: infra(configv1.OpenStackPlatformType, ""), want: disabledOnly},
		"AWS":                    {infra: infra(configv1.AWSPlatformType, ""), want: disabledOnly},
		"KubeVirt":               {infra: infra(configv1.KubevirtPlatformType, ""), want: disabledOnly},
		"Nutanix: nothing":       {infra: infra(configv1.NutanixPlatformType, "")},
		"External: nothing":      {infra: infra(configv1.ExternalPlatformType, "")},
		"no platform: nothing":   {infra: &configv1.Infrastructure{}},
		"legacy status.platform": {infra: legacy, want: allModes},
		"hosted control plane":   {infra: infra(configv1.BareMetalPlatformType, configv1.ExternalTopologyMode), want: allModes, external: true},
		"platformStatus wins over old": {infra: func() *configv1.Infrastructure {
			i := infra(configv1.AWSPlatformType, "")
			i.Status.Platform = configv1.BareMetalPlatformType //nolint:staticcheck // testing the fallback
			return i
		}(), want: disabledOnly},
	} {
		t.Run(name, func(t *testing.T) {
			f := Of(tc.infra)
			if !slices.Equal(f.Modes, tc.want) || f.Enabled() != (len(tc.want) > 0) || f.ExternalControlPlane != tc.external {
				t.Fatalf("Of() = %+v (enabled %v), want modes %v, external %v", f, f.Enabled(), tc.want, tc.external)
			}
			for _, m := range allModes {
				if f.Allows(m) != slices.Contains(tc.want, m) {
					t.Errorf("Allows(%s) = %v", m, f.Allows(m))
				}
			}
		})
	}
	// The table is shared: a caller changing its Features must not change the next platform's.
	f := Of(infra(configv1.BareMetalPlatformType, ""))
	f.Modes[0] = "changed"
	if Of(infra(configv1.BareMetalPlatformType, "")).Modes[0] != metal3.ProvisioningNetworkManaged {
		t.Error("Of returns the shared table")
	}
}
