package webhooks

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/statustext"
)

// validHost is a host as a metal3 user writes it, valid for every rule.
func validHost() *metal3.BareMetalHost {
	return &metal3.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "metal3"},
		Spec: metal3.BareMetalHostSpec{
			BMC: metal3.BMCDetails{
				Address:         "redfish-virtualmedia://192.168.111.1:8000/redfish/v1/Systems/1",
				CredentialsName: "worker-0-bmc-secret",
			},
			BootMACAddress: "00:5a:91:3f:9a:bd",
			Online:         true,
			BootMode:       metal3.UEFI,
			Image: &metal3.Image{
				URL:          "http://172.22.0.1/images/rhcos.qcow2",
				Checksum:     "http://172.22.0.1/images/rhcos.qcow2.sha256sum",
				ChecksumType: metal3.SHA256,
				DiskFormat:   ptr("qcow2"),
			},
			RootDeviceHints: &metal3.RootDeviceHints{DeviceName: "/dev/sda"},
			RAID: &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{
				{Level: "1", Name: "root", NumberOfPhysicalDisks: ptr(2)},
			}},
			UserData:                       &corev1.SecretReference{Name: "worker-0-user-data", Namespace: "metal3"},
			NetworkData:                    &corev1.SecretReference{Name: "worker-0-network-data"},
			MetaData:                       &corev1.SecretReference{Name: "worker-0-meta-data", Namespace: "metal3"},
			PreprovisioningNetworkDataName: "worker-0-preprov-network",
			AutomatedCleaningMode:          metal3.CleaningModeMetadata,
		},
	}
}

func TestValidateBareMetalHost(t *testing.T) {
	tests := map[string]struct {
		mutate func(*metal3.BareMetalHost)
		want   []string
		detail string
	}{
		"valid metal3 host": {mutate: func(*metal3.BareMetalHost) {}},
		"no BMC details (unmanaged)": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.BMC = metal3.BMCDetails{}
			h.Spec.BootMACAddress = ""
		}},
		"name with dots and underscores": {mutate: func(h *metal3.BareMetalHost) { h.Name = "rack1.worker_0" }},
		"name with a forbidden character": {
			mutate: func(h *metal3.BareMetalHost) { h.Name = "worker:0" },
			want:   []string{"metadata.name: Invalid value"}, detail: "[A-Za-z0-9._-]",
		},
		"name is a UUID": {
			mutate: func(h *metal3.BareMetalHost) { h.Name = "2c2b1e16-4f4c-4b43-9d58-0c5ac29ccfe2" },
			want:   []string{"metadata.name: Invalid value"}, detail: "cannot be a UUID",
		},
		"name is a UUID without hyphens": {
			mutate: func(h *metal3.BareMetalHost) { h.Name = "2c2b1e164f4c4b439d580c5ac29ccfe2" },
			want:   []string{"metadata.name: Invalid value"}, detail: "cannot be a UUID",
		},

		"BMC address with an unknown scheme": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "foo://10.0.0.1" },
			want:   []string{"spec.bmc.address: Invalid value"}, detail: "foo",
		},
		"BMC address with a bad port": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.0.0.1:99999" },
			want:   []string{"spec.bmc.address: Invalid value"}, detail: "port",
		},
		"libvirt without boot MAC": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "libvirt://192.168.122.1:6233/"
				h.Spec.BootMACAddress = ""
				h.Spec.RAID = nil
			},
			want: []string{"spec.bootMACAddress: Required value"}, detail: `"libvirt" requires bootMACAddress`,
		},
		"libvirt with boot MAC": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.BMC.Address = "libvirt://192.168.122.1:6233/"
			h.Spec.RAID = nil
		}},
		"inspection disabled without boot MAC": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.InspectionMode = metal3.InspectionModeDisabled
				h.Spec.BootMACAddress = ""
			},
			want: []string{"spec.bootMACAddress: Required value"}, detail: "inspection is disabled",
		},
		"inspect annotation disabled without boot MAC": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{metal3.InspectAnnotationPrefix: "disabled"}
				h.Spec.BootMACAddress = ""
			},
			want: []string{"spec.bootMACAddress: Required value"},
		},
		"libvirt with inspection disabled and no MAC is reported once": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "libvirt://192.168.122.1:6233/"
				h.Spec.InspectionMode = metal3.InspectionModeDisabled
				h.Spec.BootMACAddress = ""
				h.Spec.RAID = nil
			},
			want: []string{"spec.bootMACAddress: Required value"},
		},
		"secure boot on IPMI": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "ipmi://10.0.0.1"
				h.Spec.BootMode = metal3.UEFISecureBoot
				h.Spec.RAID = nil
			},
			want: []string{"spec.bootMode: Invalid value"}, detail: "does not support secure boot",
		},
		"secure boot on Redfish": {mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMode = metal3.UEFISecureBoot }},
		"hardware RAID on IPMI": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.0.0.1" },
			want:   []string{"spec.raid.hardwareRAIDVolumes: Forbidden"}, detail: "does not support hardware RAID",
		},
		"clearing hardware RAID with [] on IPMI": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.BMC.Address = "ipmi://10.0.0.1"
			h.Spec.RAID = &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{}}
		}},
		"boot MAC with five bytes": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00:5a:91:3f:9a" },
			want:   []string{"spec.bootMACAddress: Invalid value"}, detail: "xx:xx:xx:xx:xx:xx",
		},
		"boot MAC with dashes": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00-5a-91-3f-9a-bd" },
			want:   []string{"spec.bootMACAddress: Invalid value"},
		},
		"boot MAC in upper case": {mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00:5A:91:3F:9A:BD" }},

		"userData in another namespace": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.UserData.Namespace = "kube-system" },
			want:   []string{"spec.userData.namespace: Invalid value"}, detail: `the host's namespace "metal3"`,
		},
		"networkData and metaData in another namespace": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.NetworkData.Namespace = "other"
				h.Spec.MetaData.Namespace = "other"
			},
			want: []string{"spec.networkData.namespace: Invalid value", "spec.metaData.namespace: Invalid value"},
		},

		"image without URL": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.URL = "" },
			want:   []string{"spec.image.url: Required value"},
		},
		"image URL that is not a URL": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.URL = "rhcos.qcow2" },
			want:   []string{"spec.image.url: Invalid value"}, detail: "absolute",
		},
		"image URL with an unsupported scheme": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.URL = "ftp://172.22.0.1/rhcos.qcow2" },
			want:   []string{"spec.image.url: Invalid value"}, detail: `https://`,
		},
		"image without checksum": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.Checksum = "" },
			want:   []string{"spec.image.checksum: Required value"}, detail: "live-iso",
		},
		"live-iso without checksum": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.Image = &metal3.Image{URL: "https://example.com/live.iso", DiskFormat: ptr(metal3.DiskFormatLiveISO)}
		}},
		"oci image without checksum": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.Image = &metal3.Image{URL: "oci://quay.io/example/os:4.18"}
		}},
		"unknown checksum type": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.ChecksumType = "crc32" },
			want:   []string{"spec.image.checksumType: Unsupported value"}, detail: `"sha512"`,
		},
		"unknown image format": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.DiskFormat = ptr("iso") },
			want:   []string{"spec.image.format: Unsupported value"}, detail: `"live-iso"`,
		},

		"hardware and software RAID together": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID.SoftwareRAIDVolumes = []metal3.SoftwareRAIDVolume{{Level: "1"}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes: Forbidden"}, detail: "not both",
		},
		"software RAID on IPMI, two volumes": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.BMC.Address = "ipmi://10.0.0.1"
			h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{
				{Level: "1", RootVolume: true, PhysicalDisks: []metal3.RootDeviceHints{{DeviceName: "/dev/sda"}, {DeviceName: "/dev/sdb"}}},
				{Level: "0"},
			}}
		}},
		"three software RAID volumes": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{Level: "1"}, {Level: "0"}, {Level: "0"}}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes: Too many"},
		},
		"software RAID level 5": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{Level: "5"}}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes[0].level: Unsupported value"}, detail: `"1+0"`,
		},
		"software RAID whose first volume is not a mirror": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{Level: "0"}, {Level: "1"}}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes[0].level: Invalid value"}, detail: `must be RAID "1"`,
		},
		"two hardware RAID volumes of one name": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID.HardwareRAIDVolumes = []metal3.HardwareRAIDVolume{{Level: "1", Name: "root"}, {Level: "0", Name: "root"}, {Level: "0"}, {Level: "0"}}
			},
			want: []string{"spec.raid.hardwareRAIDVolumes[1].name: Duplicate value"},
		},
		"software RAID with one physical disk": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{
					{Level: "1", PhysicalDisks: []metal3.RootDeviceHints{{DeviceName: "/dev/sda"}}},
				}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes[0].physicalDisks: Invalid value"}, detail: "at least 2",
		},
		"software RAID member with a bad device name": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{
					{Level: "1", PhysicalDisks: []metal3.RootDeviceHints{{DeviceName: "/dev/sda"}, {DeviceName: "sdb"}}},
				}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes[0].physicalDisks[1].deviceName: Invalid value"},
		},
		"two software RAID root volumes": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{
					{Level: "1", RootVolume: true}, {Level: "0", RootVolume: true},
				}}
			},
			want: []string{"spec.raid.softwareRAIDVolumes[1].rootVolume: Invalid value"},
		},
		"hardware RAID level 7": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.RAID.HardwareRAIDVolumes[0].Level = "7" },
			want:   []string{"spec.raid.hardwareRAIDVolumes[0].level: Unsupported value"}, detail: `"6+0"`,
		},
		"hardware RAID physical disks without controller": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID.HardwareRAIDVolumes[0].PhysicalDisks = []string{"Disk.Bay.0", "Disk.Bay.1"}
			},
			want: []string{"spec.raid.hardwareRAIDVolumes[0].controller: Required value"},
		},
		"hardware RAID disk count disagrees with physical disks": {
			mutate: func(h *metal3.BareMetalHost) {
				v := &h.Spec.RAID.HardwareRAIDVolumes[0]
				v.Controller = "RAID.Integrated.1-1"
				v.PhysicalDisks = []string{"Disk.Bay.0", "Disk.Bay.1", "Disk.Bay.2"}
			},
			want: []string{"spec.raid.hardwareRAIDVolumes[0].numberOfPhysicalDisks: Invalid value"}, detail: "(3)",
		},

		"deprecated firmware": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.Firmware = &metal3.FirmwareConfig{VirtualizationEnabled: ptr(true)}
			},
			want: []string{"spec.firmware: Forbidden"}, detail: "no longer supported, use HostFirmwareSettings",
		},
		"root device name not under /dev": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.RootDeviceHints.DeviceName = "sda" },
			want:   []string{"spec.rootDeviceHints.deviceName: Invalid value"}, detail: "/dev/",
		},
		"root device name in /dev/disk/by-id": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RootDeviceHints.DeviceName = "/dev/disk/by-id/wwn-0x5000c500a0b1c2d3"
			},
			want: []string{"spec.rootDeviceHints.deviceName: Invalid value"}, detail: "/dev/disk/by-path/",
		},
		"root device name by path": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.RootDeviceHints.DeviceName = "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"
		}},
		"offline with power off disabled": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.Online = false
				h.Spec.DisablePowerOff = true
			},
			want: []string{"spec.disablePowerOff: Invalid value"}, detail: "online",
		},
		"online with power off disabled": {mutate: func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }},
		// Accepted as metal3's webhook does; the host controller shows a power management error
		// naming the annotation until it is removed (the host is never off).
		"held reboot with power off disabled": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.DisablePowerOff = true
			h.Annotations = map[string]string{metal3.RebootAnnotationPrefix + "/remediation": ""}
		}},
		"one-shot reboot with power off disabled": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.DisablePowerOff = true
			h.Annotations = map[string]string{metal3.RebootAnnotationPrefix: `{"mode":"hard"}`}
		}},
		"held reboot with power off allowed": {mutate: func(h *metal3.BareMetalHost) {
			h.Annotations = map[string]string{metal3.RebootAnnotationPrefix + "/remediation": ""}
		}},
		"unknown inspection mode": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.InspectionMode = "deep" },
			want:   []string{"spec.inspectionMode: Unsupported value"}, detail: `"fast"`,
		},
		"inspection mode agent contradicts inspect annotation": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.InspectionMode = metal3.InspectionModeAgent
				h.Annotations = map[string]string{metal3.InspectAnnotationPrefix: "disabled"}
			},
			want: []string{"spec.inspectionMode: Invalid value"}, detail: "contradicts",
		},
		"inspection mode disabled agrees with inspect annotation": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.InspectionMode = metal3.InspectionModeDisabled
			h.Annotations = map[string]string{metal3.InspectAnnotationPrefix: "disabled"}
		}},
		"fast inspection on a BMC that cannot inspect out-of-band": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "ipmi://10.0.0.1"
				h.Spec.InspectionMode = metal3.InspectionModeFast
				h.Spec.RAID = nil
			},
			want: []string{"spec.inspectionMode: Invalid value"}, detail: `BMC address type "ipmi" cannot inspect out-of-band`,
		},
		"fast inspection on a Redfish BMC": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.InspectionMode = metal3.InspectionModeFast
		}},
		"re-inspection request with inspection mode fast": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.InspectionMode = metal3.InspectionModeFast
			h.Annotations = map[string]string{metal3.InspectAnnotationPrefix: ""}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := validHost()
			tc.mutate(host)
			checkErrors(t, ValidateBareMetalHost(host), tc.want, tc.detail)
		})
	}
}

// A rejection reaches the client, the audit log and GitOps tools: URLs refused in it keep no
// credentials, in the value or in the parser's words.
func TestRejectionsDoNotEchoURLCredentials(t *testing.T) {
	host := validHost()
	host.Spec.Image.URL = "gopher://user:s3cret@mirror.example/os.qcow2"
	_, err := (&BareMetalHostValidator{}).ValidateCreate(context.Background(), host)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "spec.image.url") {
		t.Errorf("image URL rejection: %v", err)
	}
	host = validHost()
	host.Spec.Image.URL = "http://user:s3cret@mirror.example/%zz"
	if _, err := (&BareMetalHostValidator{}).ValidateCreate(context.Background(), host); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("unparsable image URL rejection: %v", err)
	}
	// A password holding an unencoded "/", "#" or "?": net/url takes its start for a port and
	// quotes it in its error.
	for _, url := range []string{"https://user:s3c/ret@mirror.example/os.qcow2", "https://user:s3c#ret@mirror.example/os.qcow2"} {
		host = validHost()
		host.Spec.Image.URL = url
		if _, err := (&BareMetalHostValidator{}).ValidateCreate(context.Background(), host); err == nil || strings.Contains(err.Error(), "s3c") {
			t.Errorf("image URL %s rejection: %v", statustext.Redact(url), err)
		}
	}
	// User information Redact does not take for one: one slash after the scheme, no scheme, a
	// space in the password. The value is left out; the field is still named.
	hidden := []string{"https:/user:s3cret@mirror.example/os.qcow2", "user:s3cret@mirror.example/os.qcow2", "https://user:s3 cret@mirror.example/os.qcow2"}
	for _, url := range hidden {
		host = validHost()
		host.Spec.Image.URL = url
		if _, err := (&BareMetalHostValidator{}).ValidateCreate(context.Background(), host); err == nil || strings.Contains(err.Error(), "s3") || !strings.Contains(err.Error(), "spec.image.url") {
			t.Errorf("image URL %q rejection: %v", url, err)
		}
	}
	for _, url := range append([]string{"gopher://user:s3cret@fw.example/bmc.bin"}, hidden...) {
		hfc := &metal3.HostFirmwareComponents{Spec: metal3.HostFirmwareComponentsSpec{Updates: []metal3.FirmwareUpdate{
			{Component: "bmc", URL: url},
		}}}
		if _, err := (&HostFirmwareComponentsValidator{}).ValidateCreate(context.Background(), hfc); err == nil || strings.Contains(err.Error(), "s3") {
			t.Errorf("firmware URL %q rejection: %v", url, err)
		}
	}
	for _, url := range hidden {
		sub := &metal3.BMCEventSubscription{Spec: metal3.BMCEventSubscriptionSpec{HostName: "h", Destination: url}}
		if _, err := (&BMCEventSubscriptionValidator{}).ValidateCreate(context.Background(), sub); err == nil || strings.Contains(err.Error(), "s3") || !strings.Contains(err.Error(), "spec.destination") {
			t.Errorf("event destination %q rejection: %v", url, err)
		}
	}
}

// A host being deleted may lose its finalizers whatever its stored spec holds, but its BMC
// address and boot MAC still may not change: deprovisioning cleans and powers off the machine
// behind them.
func TestValidateUpdateOfDeletedHost(t *testing.T) {
	deleting := func() *metal3.BareMetalHost {
		h := validHost()
		h.Status.Provisioning.State = metal3.StateDeprovisioning
		h.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		h.Finalizers = []string{metal3.BareMetalHostFinalizer}
		return h
	}
	v := &BareMetalHostValidator{}

	oldHost := deleting()
	newHost := oldHost.DeepCopy()
	newHost.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.2/redfish/v1/Systems/1"
	_, err := v.ValidateUpdate(context.Background(), oldHost, newHost)
	if err == nil || !strings.Contains(err.Error(), "spec.bmc.address") {
		t.Errorf("BMC address change of a deleted host: %v", err)
	}
	newHost = oldHost.DeepCopy()
	newHost.Spec.BootMACAddress = "00:5a:91:3f:9a:be"
	if _, err := v.ValidateUpdate(context.Background(), oldHost, newHost); err == nil {
		t.Error("boot MAC change of a deleted host allowed")
	}

	oldHost = deleting()
	oldHost.Spec.RootDeviceHints.DeviceName = "sda" // stored before validation refused it
	newHost = oldHost.DeepCopy()
	newHost.Finalizers = nil
	if _, err := v.ValidateUpdate(context.Background(), oldHost, newHost); err != nil {
		t.Errorf("finalizer removal of a deleted host with an invalid spec refused: %v", err)
	}
}

// The BMC password must never come back in an error: errors end up in events and logs.
func TestValidateBareMetalHostDoesNotEchoBMCCredentials(t *testing.T) {
	host := validHost()
	host.Spec.BMC.Address = "redfish://admin:s3cr3t@10.0.0.1/redfish/v1/Systems/1"
	errs := ValidateBareMetalHost(host)
	checkErrors(t, errs, []string{"spec.bmc.address: Invalid value"}, "credentials")
	if msg := errs.ToAggregate().Error(); strings.Contains(msg, "s3cr3t") {
		t.Errorf("error echoes the password: %s", msg)
	}
}

func TestValidateBareMetalHostUpdate(t *testing.T) {
	// registered is a host the controller has registered and inspected.
	registered := func() *metal3.BareMetalHost {
		h := validHost()
		h.Status.OperationalStatus = metal3.OperationalStatusOK
		h.Status.Provisioning.State = metal3.StateAvailable
		return h
	}
	tests := map[string]struct {
		old    func(*metal3.BareMetalHost) // changes to the stored host; nil: none
		mutate func(*metal3.BareMetalHost)
		want   []string
		detail string
	}{
		"no change": {mutate: func(*metal3.BareMetalHost) {}},
		"allowed changes on a registered host": {mutate: func(h *metal3.BareMetalHost) {
			h.Spec.Online = false
			h.Spec.Image.URL = "http://172.22.0.1/images/rhcos-2.qcow2"
			h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "worker-0", Namespace: "metal3"}
			h.Spec.RootDeviceHints = &metal3.RootDeviceHints{MinSizeGigabytes: 100}
			h.Spec.BMC.CredentialsName = "worker-0-bmc-secret-2"
			h.Annotations = map[string]string{metal3.RebootAnnotationPrefix: ""}
			h.Finalizers = []string{metal3.BareMetalHostFinalizer}
		}},
		"BMC address change while available": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.2/redfish/v1/Systems/1"
			},
			want: []string{"spec.bmc.address: Forbidden"}, detail: "detach",
		},
		"BMC address change while registering": {
			old: func(h *metal3.BareMetalHost) { h.Status.Provisioning.State = metal3.StateRegistering },
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.2/redfish/v1/Systems/1"
			},
		},
		"BMC address change while detached": {
			old: func(h *metal3.BareMetalHost) {
				h.Status.Provisioning.State = metal3.StateProvisioned
				h.Status.OperationalStatus = metal3.OperationalStatusDetached
			},
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.2/redfish/v1/Systems/1"
			},
		},
		"BMC address change after a detach was requested, not yet done": {
			// The controller defers a detach while provisioning and would register the running
			// node again with the new address.
			old: func(h *metal3.BareMetalHost) {
				h.Status.Provisioning.State = metal3.StateProvisioning
				h.Annotations = map[string]string{metal3.DetachedAnnotation: ""}
			},
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.2/redfish/v1/Systems/1"
			},
			want: []string{"spec.bmc.address: Forbidden"},
		},
		"BMC address change in the update that requests the detach": {
			old: func(h *metal3.BareMetalHost) { h.Status.Provisioning.State = metal3.StateProvisioned },
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{metal3.DetachedAnnotation: ""}
				h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.2/redfish/v1/Systems/1"
			},
			want: []string{"spec.bmc.address: Forbidden"},
		},
		"BMC address set on a host that had none": {
			old: func(h *metal3.BareMetalHost) {
				h.Spec.BMC = metal3.BMCDetails{}
				h.Status.Provisioning.State = metal3.StateUnmanaged
			},
			mutate: func(*metal3.BareMetalHost) {},
		},
		"boot MAC change": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00:5a:91:3f:9a:be" },
			want:   []string{"spec.bootMACAddress: Forbidden"}, detail: `"00:5a:91:3f:9a:bd"`,
		},
		"boot MAC removed": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "" },
			want:   []string{"spec.bootMACAddress: Forbidden"},
		},
		"boot MAC change of case only": {mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00:5A:91:3F:9A:BD" }},
		"boot MAC set on a host that had none": {
			old:    func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "" },
			mutate: func(*metal3.BareMetalHost) {},
		},
		"externallyProvisioned turned on while available": {mutate: func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true }},
		"externallyProvisioned turned on while ready (old name of available)": {
			old:    func(h *metal3.BareMetalHost) { h.Status.Provisioning.State = metal3.StateReady },
			mutate: func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true },
		},
		"externallyProvisioned turned on while provisioned": {
			old:    func(h *metal3.BareMetalHost) { h.Status.Provisioning.State = metal3.StateProvisioned },
			mutate: func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true },
			want:   []string{"spec.externallyProvisioned: Forbidden"}, detail: `the host is "provisioned"`,
		},
		"externallyProvisioned turned on while inspecting": {
			old:    func(h *metal3.BareMetalHost) { h.Status.Provisioning.State = metal3.StateInspecting },
			mutate: func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true },
			want:   []string{"spec.externallyProvisioned: Forbidden"},
		},
		"externallyProvisioned kept on while externally provisioned": {
			old: func(h *metal3.BareMetalHost) {
				h.Spec.ExternallyProvisioned = true
				h.Status.Provisioning.State = metal3.StateExternallyProvisioned
			},
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Online = false },
		},
		"externallyProvisioned turned off": {
			old: func(h *metal3.BareMetalHost) {
				h.Spec.ExternallyProvisioned = true
				h.Status.Provisioning.State = metal3.StateExternallyProvisioned
			},
			mutate: func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = false },
		},
		"stored error kept by an unrelated change": {
			old: func(h *metal3.BareMetalHost) {
				h.Spec.Firmware = &metal3.FirmwareConfig{SriovEnabled: ptr(true)}
			},
			mutate: func(h *metal3.BareMetalHost) { h.Finalizers = []string{metal3.BareMetalHostFinalizer} },
		},
		"new error on an update": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Firmware = &metal3.FirmwareConfig{SriovEnabled: ptr(true)} },
			want:   []string{"spec.firmware: Forbidden"},
		},
		"stored invalid value replaced by another invalid value": {
			old:    func(h *metal3.BareMetalHost) { h.Spec.RootDeviceHints.DeviceName = "sda" },
			mutate: func(h *metal3.BareMetalHost) { h.Spec.RootDeviceHints.DeviceName = "sdb" },
			want:   []string{"spec.rootDeviceHints.deviceName: Invalid value"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			oldHost := registered()
			if tc.old != nil {
				tc.old(oldHost)
			}
			newHost := oldHost.DeepCopy()
			tc.mutate(newHost)
			checkErrors(t, ValidateBareMetalHostUpdate(oldHost, newHost), tc.want, tc.detail)
		})
	}
}
