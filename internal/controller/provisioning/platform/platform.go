// Package platform decides from the cluster's Infrastructure object (infrastructures.config.
// openshift.io/cluster) what the provisioning stack may do there: every provisioning network mode
// on bare metal and on platform None, only Disabled (virtual media over the external network) on
// the cloud platforms OpenShift lets add bare-metal workers to, and nothing anywhere else.
package platform

import (
	"slices"

	configv1 "github.com/openshift/api/config/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// InfrastructureName is the cluster's Infrastructure singleton.
const InfrastructureName = "cluster"

// Features is what the platform allows.
type Features struct {
	// Platform is the platform type ("" when the Infrastructure object names none).
	Platform configv1.PlatformType
	// Modes are the provisioning network modes the platform supports; none means there is
	// nothing to deploy here.
	Modes []metal3.ProvisioningNetwork
	// ExternalControlPlane: the control plane runs elsewhere (hosted clusters), so the stack does
	// not ask for control-plane nodes.
	ExternalControlPlane bool
}

// Enabled reports whether the stack is deployed on this platform at all.
func (f Features) Enabled() bool { return len(f.Modes) > 0 }

// Allows reports whether mode is supported.
func (f Features) Allows(mode metal3.ProvisioningNetwork) bool { return slices.Contains(f.Modes, mode) }

var (
	allModes = []metal3.ProvisioningNetwork{
		metal3.ProvisioningNetworkManaged, metal3.ProvisioningNetworkUnmanaged, metal3.ProvisioningNetworkDisabled,
	}
	disabledOnly = []metal3.ProvisioningNetwork{metal3.ProvisioningNetworkDisabled}
)

// modes by platform, as OpenShift's cluster-baremetal-operator enables them: bare metal and None
// (user-provisioned clusters) everything; the platforms where bare-metal workers can join over
// the external network only Disabled.
var modes = map[configv1.PlatformType][]metal3.ProvisioningNetwork{
	configv1.BareMetalPlatformType: allModes,
	configv1.NonePlatformType:      allModes,
	configv1.OpenStackPlatformType: disabledOnly,
	configv1.VSpherePlatformType:   disabledOnly,
	configv1.AWSPlatformType:       disabledOnly,
	configv1.AzurePlatformType:     disabledOnly,
	configv1.GCPPlatformType:       disabledOnly,
	configv1.KubevirtPlatformType:  disabledOnly,
}

// Of reads the features of the platform an Infrastructure object describes.
func Of(infra *configv1.Infrastructure) Features {
	t := infra.Status.Platform //nolint:staticcheck // the deprecated field, for objects written before platformStatus
	if infra.Status.PlatformStatus != nil && infra.Status.PlatformStatus.Type != "" {
		t = infra.Status.PlatformStatus.Type
	}
	return Features{
		Platform:             t,
		Modes:                slices.Clone(modes[t]),
		ExternalControlPlane: infra.Status.ControlPlaneTopology == configv1.ExternalTopologyMode,
	}
}
