package ironic

import (
	"fmt"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// driver_info keys of the agent (deploy) image.
const (
	keyDeployKernel  = "deploy_kernel"
	keyDeployRamdisk = "deploy_ramdisk"
	keyDeployISO     = "deploy_iso"
	keyKernelParams  = "kernel_append_params"
)

// deployImage chooses the agent image for a host, as metal3 does: the host's PreprovisioningImage
// when it has a usable one (an ISO only where the BMC boots ISOs), else the configured images (the
// ISO preferred where the BMC boots ISOs). With an image builder configured, the global images
// only supply the kernel paired with an initrd. ok is false when nothing fits. Every key is in the
// result, nil when unused, so applying it also removes stale keys.
func deployImage(cfg Config, access *bmc.Access, ppi *provisioner.PreprovisioningImage) (info map[string]any, ok bool) {
	info = map[string]any{keyDeployKernel: nil, keyDeployRamdisk: nil, keyDeployISO: nil, keyKernelParams: nil}
	allowISO := access.SupportsISOPreprovisioningImage
	if ppi != nil && ppi.ImageURL != "" {
		switch ppi.Format {
		case metal3.ImageFormatISO:
			if allowISO {
				info[keyDeployISO] = ppi.ImageURL
				return info, true
			}
		case metal3.ImageFormatInitRD:
			kernel := ppi.KernelURL
			if kernel == "" {
				kernel = cfg.DeployKernelURL
			}
			if kernel == "" {
				return info, false
			}
			info[keyDeployKernel], info[keyDeployRamdisk] = kernel, ppi.ImageURL
			if ppi.ExtraKernelParams != "" {
				// %default% keeps the parameters Ironic is configured with.
				info[keyKernelParams] = "%default% " + ppi.ExtraKernelParams
			}
			return info, true
		}
	}
	if cfg.PreprovisioningImageBuilder {
		return info, false
	}
	if allowISO && cfg.DeployISOURL != "" {
		info[keyDeployISO] = cfg.DeployISOURL
		return info, true
	}
	if cfg.DeployKernelURL != "" && cfg.DeployRamdiskURL != "" {
		info[keyDeployKernel], info[keyDeployRamdisk] = cfg.DeployKernelURL, cfg.DeployRamdiskURL
		return info, true
	}
	return info, false
}

// PreprovisioningImageFormats: with an image builder (--build-preprov-image), the formats the
// host's BMC can boot, most preferred first (acceptFormats); without one, nil (no image is asked
// for). A bad BMC address is an error (the host controller reports it before it gets here).
func (p *Provisioner) PreprovisioningImageFormats(host provisioner.Host) ([]metal3.ImageFormat, error) {
	if !p.cfg.PreprovisioningImageBuilder {
		return nil, nil
	}
	access, err := parseAccess(host)
	if err != nil {
		return nil, err
	}
	return acceptFormats(access), nil
}

// acceptFormats is metal3's list: an ISO first where the BMC boots one (virtual media, UEFI
// HTTP), then the initrd, which Ironic boots on any BMC (over the network, or in an ISO it builds
// from the kernel and the initrd for virtual media).
func acceptFormats(access *bmc.Access) []metal3.ImageFormat {
	if access.SupportsISOPreprovisioningImage {
		return []metal3.ImageFormat{metal3.ImageFormatISO, metal3.ImageFormatInitRD}
	}
	return []metal3.ImageFormat{metal3.ImageFormatInitRD}
}

// setDeployImage adds the agent image to a patch for an operation that boots the agent. Without a
// usable image: with an image builder, the host must wait for its PreprovisioningImage; without
// one, Ironic's own defaults ([conductor]deploy_kernel/ramdisk) are left to apply.
func (p *Provisioner) setDeployImage(pt *patch, n *nodes.Node, host provisioner.Host, access *bmc.Access) error {
	info, ok := deployImage(p.cfg, access, host.PreprovisioningImage)
	if !ok {
		if p.cfg.PreprovisioningImageBuilder {
			return provisioner.ErrNeedsPreprovisioningImage
		}
		return nil
	}
	pt.setKeys("driver_info", n.DriverInfo, info)
	return nil
}

// bootModeCapabilities are the node capabilities for each boot mode, as metal3 writes them.
var bootModeCapabilities = map[metal3.BootMode]string{
	metal3.UEFI:           "boot_mode:uefi",
	metal3.UEFISecureBoot: "boot_mode:uefi,secure_boot:true",
	metal3.Legacy:         "boot_mode:bios",
}

func bootMode(m metal3.BootMode) metal3.BootMode {
	if _, ok := bootModeCapabilities[m]; !ok {
		return metal3.UEFI
	}
	return m
}

// capabilities replaces boot_mode and secure_boot in a node's capabilities string and keeps the
// rest (inspection may have added some).
func capabilities(existing any, mode metal3.BootMode) string {
	s, _ := existing.(string)
	var keep []string
	for item := range strings.SplitSeq(s, ",") {
		if item == "" || strings.HasPrefix(item, "boot_mode:") || strings.HasPrefix(item, "secure_boot:") {
			continue
		}
		keep = append(keep, item)
	}
	return strings.Join(append(keep, bootModeCapabilities[bootMode(mode)]), ",")
}

// inspectInterface is "agent" (in-band), or the BMC's out-of-band interface for fast inspection
// when it has one.
func inspectInterface(host provisioner.Host, access *bmc.Access) string {
	if host.InspectionMode == metal3.InspectionModeFast && access.Interfaces.Inspect != "" {
		return access.Interfaces.Inspect
	}
	return "agent"
}

// automatedClean is the node's automated_clean for a host's cleaning mode.
func automatedClean(mode metal3.AutomatedCleaningMode) bool {
	return mode != metal3.CleaningModeDisabled
}

// cleaningPatch is the patch before a transition that cleans if the host's cleaning mode says so
// (undeploy, provide): automated_clean as the mode says, and the deploy image the agent that
// cleans boots from. clean says whether the node will clean.
func (p *Provisioner) cleaningPatch(n *nodes.Node, host provisioner.Host, access *bmc.Access) (pt patch, clean bool, err error) {
	clean = automatedClean(host.AutomatedCleaningMode)
	if n.AutomatedClean == nil || *n.AutomatedClean != clean {
		pt.setField("automated_clean", clean, n.AutomatedClean)
	}
	if clean {
		if err := p.setDeployImage(&pt, n, host, access); err != nil {
			return patch{}, false, err
		}
	}
	return pt, clean, nil
}

// parseAccess parses the BMC address; a bad one is a host error (the webhook normally stops it).
func parseAccess(host provisioner.Host) (*bmc.Access, error) {
	a, err := bmc.Parse(host.BMCAddress)
	if err != nil {
		return nil, fmt.Errorf("spec.bmc.address: %w", err)
	}
	return a, nil
}
