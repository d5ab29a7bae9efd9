package ironic

import (
	"errors"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Deploy interfaces. Direct is Ironic's default and is written as "remove the field".
const (
	deployRamdisk     = "ramdisk"
	deployCustomAgent = "custom-agent"
)

// deployPlan is how a host is provisioned: which deploy interface, which instance_info, which
// deploy steps, and whether the agent boots (everything but a live ISO).
type deployPlan struct {
	// deployInterface is nil for direct (Ironic's default), else ramdisk or custom-agent.
	deployInterface any
	// instanceInfo holds every image key; nil values are removed from the node.
	instanceInfo map[string]any
	// driverInfo holds driver_info keys the deploy sets.
	driverInfo map[string]any
	steps      []nodes.DeployStep
	liveISO    bool
	// pullSecret is instance_info image_pull_secret (nil: none, removed). Outside instanceInfo,
	// so outside the fingerprint: it is read at the deployment's start, a credential's rotation is
	// no other plan, and plans fingerprinted before it existed stay the same.
	pullSecret any
}

// imageKeys are the instance_info keys a deploy plan owns.
var imageKeys = []string{"image_source", "image_checksum", "image_os_hash_algo", "image_os_hash_value", "image_disk_format", "boot_iso"}

// planDeploy builds the plan for a disk image (direct deploy: image_source and its checksum), a
// live ISO (ramdisk deploy booting boot_iso), or a custom deploy method (custom-agent with the
// method as a deploy step; the image, if any, is passed along for the method to use).
func planDeploy(cfg Config, data provisioner.ProvisionData) (deployPlan, error) {
	plan := deployPlan{instanceInfo: map[string]any{}, driverInfo: map[string]any{}}
	for _, k := range imageKeys {
		plan.instanceInfo[k] = nil
	}
	caps := map[string]any{}
	if bootMode(data.BootMode) == metal3.UEFISecureBoot {
		caps["secure_boot"] = "true"
	}
	plan.instanceInfo["capabilities"] = caps
	img := data.Image
	hasImage := img != nil && img.URL != ""

	switch {
	case data.CustomDeploy != nil && data.CustomDeploy.Method != "":
		plan.deployInterface = deployCustomAgent
		plan.steps = customDeploySteps(data.CustomDeploy)
		if hasImage {
			setImage(plan.instanceInfo, img)
		}
	case img.IsLiveISO():
		if !hasImage {
			return plan, errors.New("spec.image.url: a live ISO needs a URL")
		}
		plan.deployInterface = deployRamdisk
		plan.liveISO = true
		plan.instanceInfo["boot_iso"] = img.URL
		persistent := cfg.LiveISOForcePersistentBootDevice
		if persistent == "" {
			persistent = "Default"
		}
		plan.driverInfo["force_persistent_boot_device"] = persistent
	case hasImage:
		if img.Checksum == "" && !img.IsOCI() {
			return plan, errors.New("spec.image.checksum: a disk image needs a checksum (or the URL of a checksum file)")
		}
		setImage(plan.instanceInfo, img)
		if img.IsOCI() && data.ImagePullSecret != "" {
			// Ironic pulls from the registry with it (its API shows it masked).
			plan.pullSecret = data.ImagePullSecret
		}
		plan.driverInfo["force_persistent_boot_device"] = "Default"
	default:
		return plan, errors.New("spec.image or spec.customDeploy: nothing to provision")
	}
	return plan, nil
}

// setImage writes image_source, the checksum and the disk format. A checksum without a type (or
// "auto") goes to image_checksum, where Ironic detects the algorithm by its length or fetches it
// when it is a URL; a typed one goes to image_os_hash_algo/value.
func setImage(info map[string]any, img *metal3.Image) {
	info["image_source"] = img.URL
	if img.DiskFormat != nil && *img.DiskFormat != "" {
		info["image_disk_format"] = *img.DiskFormat
	}
	if img.Checksum == "" {
		return
	}
	switch t := img.ChecksumType; t {
	case "", metal3.AutoChecksum:
		info["image_checksum"] = img.Checksum
	default:
		info["image_os_hash_algo"] = strings.ToLower(string(t))
		info["image_os_hash_value"] = img.Checksum
	}
}

// applies writes the plan into a patch for the node.
func (plan deployPlan) apply(pt *patch, n *nodes.Node) {
	pt.setKeys("instance_info", n.InstanceInfo, plan.instanceInfo)
	pt.setKeys("instance_info", n.InstanceInfo, map[string]any{"image_pull_secret": plan.pullSecret})
	pt.setKeys("driver_info", n.DriverInfo, plan.driverInfo)
	if plan.deployInterface == nil {
		// Back to Ironic's default only when the node has one of ours set.
		if n.DeployInterface == deployRamdisk || n.DeployInterface == deployCustomAgent {
			pt.setField("deploy_interface", nil, n.DeployInterface)
		}
		return
	}
	pt.setField("deploy_interface", plan.deployInterface, n.DeployInterface)
}

// interfaceChanges reports whether the plan needs another deploy_interface than the node's, which
// Ironic changes only in enroll, manageable and available (and inspection, and maintenance).
func (plan deployPlan) interfaceChanges(n *nodes.Node) bool {
	if plan.deployInterface == nil {
		return n.DeployInterface == deployRamdisk || n.DeployInterface == deployCustomAgent
	}
	return n.DeployInterface != plan.deployInterface
}

// extraDeployed holds, in the node's extra, the fingerprint of the plan last deployed: what the
// deployment was asked for, which instance_info no longer tells once the deployment started.
// Ironic rewrites the image keys while deploying: image_source becomes the target of an HTTP
// redirect, an OCI image gets the checksum and disk format of its manifest, a converted image
// (image_download_source local, file URLs) loses its checksum for the raw one's.
const extraDeployed = "metalforge_deployed"

// deployFingerprintVersion prefixes the stored fingerprint: a later version that plans otherwise
// (another key, other capabilities) changes every fingerprint, and a node deployed by the earlier
// one is then compared by its image keys rather than taken for a new request (aborted, deployed
// again) at the upgrade.
const deployFingerprintVersion = "v1:"

// fingerprint identifies the plan: what it writes into instance_info (the image keys and the
// secure boot capability), the deploy interface and the deploy steps (a custom deploy method).
func (plan deployPlan) fingerprint() string {
	return deployFingerprintVersion + fingerprint(plan.instanceInfo, plan.deployInterface, plan.steps)
}

// matches reports whether the node is set up for this plan. It tells "still deploying what we
// asked" from "asked for something else since": by the fingerprint the deploy wrote into extra,
// or, for a node deployed without one of this version, by the image keys and the deploy
// interface.
func (plan deployPlan) matches(n *nodes.Node) bool {
	if fp, ok := n.Extra[extraDeployed].(string); ok && strings.HasPrefix(fp, deployFingerprintVersion) {
		return fp == plan.fingerprint()
	}
	for _, k := range imageKeys {
		want, have := plan.instanceInfo[k], n.InstanceInfo[k]
		if want == nil {
			if !isEmpty(have) {
				return false
			}
			continue
		}
		if !sameJSON(want, have) {
			return false
		}
	}
	if plan.deployInterface == nil {
		return n.DeployInterface != deployRamdisk && n.DeployInterface != deployCustomAgent
	}
	return n.DeployInterface == plan.deployInterface
}
