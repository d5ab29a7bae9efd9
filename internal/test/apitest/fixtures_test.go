package apitest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Full examples: every field of every kind set to a realistic, valid value. requireFullySet
// keeps them full when fields are added.

// stamp is a time with second precision in UTC, as it comes back from the API server.
func stamp(minute int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 11, 22, 10, minute, 0, 0, time.UTC))
}

func condition(typ, reason string, minute int) metav1.Condition {
	return metav1.Condition{
		Type: typ, Status: metav1.ConditionTrue, ObservedGeneration: 1,
		LastTransitionTime: stamp(minute), Reason: reason, Message: "set by the round-trip test",
	}
}

func fullImage() metal3.Image {
	return metal3.Image{
		URL:               "http://images.example.com/ubuntu-24.04.qcow2",
		Checksum:          "http://images.example.com/ubuntu-24.04.qcow2.sha256sum",
		ChecksumType:      metal3.SHA256,
		DiskFormat:        ptr.To("qcow2"),
		OCIAuthSecretName: ptr.To("registry-creds"),
	}
}

func fullHints() metal3.RootDeviceHints {
	return metal3.RootDeviceHints{
		DeviceName: "/dev/sda", HCTL: "0:0:0:0", Model: "PERC", Vendor: "DELL", SerialNumber: "S123",
		MinSizeGigabytes: 100, WWN: "0x5000c500a0b1c2d3", WWNWithExtension: "0x5000c500a0b1c2d3-ext",
		WWNVendorExtension: "0x1234", Rotational: ptr.To(true),
	}
}

func fullRAID() metal3.RAIDConfig {
	disk1, disk2 := fullHints(), fullHints()
	disk2.DeviceName, disk2.SerialNumber = "/dev/sdb", "S124"
	return metal3.RAIDConfig{
		HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{{
			SizeGibibytes: ptr.To(100), Level: "1+0", Name: "root", Rotational: ptr.To(false),
			NumberOfPhysicalDisks: ptr.To(4), Controller: "RAID.Integrated.1-1",
			PhysicalDisks: []string{"Disk.Bay.0", "Disk.Bay.1", "Disk.Bay.2", "Disk.Bay.3"},
		}},
		SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{
			RootVolume: true, SizeGibibytes: ptr.To(50), Level: "1",
			PhysicalDisks: []metal3.RootDeviceHints{disk1, disk2},
		}},
	}
}

func fullFirmwareConfig() metal3.FirmwareConfig {
	return metal3.FirmwareConfig{
		VirtualizationEnabled: ptr.To(true), SimultaneousMultithreadingEnabled: ptr.To(false), SriovEnabled: ptr.To(true),
	}
}

func fullHardware() metal3.HardwareDetails {
	return metal3.HardwareDetails{
		SystemVendor: metal3.HardwareSystemVendor{Manufacturer: "Dell Inc.", ProductName: "PowerEdge R650", SerialNumber: "7XK2QJ3"},
		Firmware:     metal3.Firmware{BIOS: metal3.BIOS{Date: "03/26/2024", Vendor: "Dell Inc.", Version: "1.13.2"}},
		RAMMebibytes: 262144,
		NIC: []metal3.NIC{{
			Name: "eno1", Model: "0x8086 0x1593", MAC: "00:5c:52:31:3a:9c", IP: "192.168.111.20", SpeedGbps: 25,
			VLANs: []metal3.VLAN{{ID: 100, Name: "storage"}}, VLANID: 10, PXE: true,
			LLDP:       &metal3.LLDP{SwitchID: "c0:d6:82:1f:22:00", PortID: "Ethernet1/12", SwitchSystemName: "leaf-a1"},
			PCIAddress: "0000:31:00.0",
		}},
		Storage: []metal3.Storage{{
			Name: "/dev/disk/by-path/pci-0000:18:00.0-scsi-0:2:0:0", AlternateNames: []string{"/dev/sda"},
			Rotational: true, Type: metal3.HDD, SizeBytes: 4 * metal3.TeraByte, Vendor: "SEAGATE", Model: "ST4000NM",
			SerialNumber: "ZC1234", WWN: "0x5000c500a0b1c2d3", WWNVendorExtension: "0x1", WWNWithExtension: "0x5000c500a0b1c2d3-0x1",
			HCTL: "0:2:0:0",
		}},
		CPU:      metal3.CPU{Arch: "x86_64", Model: "Intel Xeon Gold 6338", ClockMegahertz: 2000.5, Flags: []string{"avx512f", "vmx"}, Count: 128},
		Hostname: "worker-0",
	}
}

func fullBareMetalHost(ns string) *metal3.BareMetalHost {
	secret := func(name string) *corev1.SecretReference { return &corev1.SecretReference{Name: name, Namespace: ns} }
	image := fullImage()
	hints := fullHints()
	raid := fullRAID()
	fw := fullFirmwareConfig()
	hw := fullHardware()
	return &metal3.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: metal3.BareMetalHostSpec{
			Taints: []corev1.Taint{{Key: "example.com/legacy", Value: "x", Effect: corev1.TaintEffectNoSchedule}},
			BMC: metal3.BMCDetails{
				Address: "redfish-virtualmedia+https://10.0.0.5/redfish/v1/Systems/1", CredentialsName: "full-bmc",
				DisableCertificateVerification: true,
			},
			RAID:                           &raid,
			Firmware:                       &fw,
			HardwareProfile:                "empty",
			RootDeviceHints:                &hints,
			BootMode:                       metal3.UEFISecureBoot,
			BootMACAddress:                 "00:5c:52:31:3a:9c",
			Online:                         true,
			ConsumerRef:                    &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3Machine", Name: "m-1", Namespace: ns},
			Image:                          &image,
			UserData:                       secret("full-user-data"),
			PreprovisioningNetworkDataName: "full-preprov-nd",
			NetworkData:                    secret("full-network-data"),
			MetaData:                       secret("full-meta-data"),
			Description:                    "rack A slot 12",
			ExternallyProvisioned:          true,
			AutomatedCleaningMode:          metal3.CleaningModeDisabled,
			CustomDeploy:                   &metal3.CustomDeploy{Method: "install_coreos"},
			Architecture:                   "aarch64",
			DisablePowerOff:                true,
			InspectionMode:                 metal3.InspectionModeFast,
		},
		Status: metal3.BareMetalHostStatus{
			OperationalStatus: metal3.OperationalStatusError,
			ErrorType:         metal3.DetachError,
			LastUpdated:       ptr.To(stamp(1)),
			HardwareProfile:   "unknown",
			HardwareDetails:   &hw,
			Provisioning: metal3.ProvisionStatus{
				State: metal3.StateProvisioned, ID: "6f2a4bd0-3c7e-4a8f-9d51-0c2b7a9e1f00", Image: image,
				RootDeviceHints: &hints, BootMode: metal3.UEFI, RAID: &raid, Firmware: &fw,
				CustomDeploy: &metal3.CustomDeploy{Method: "install_coreos"},
			},
			GoodCredentials:  metal3.CredentialsStatus{Reference: secret("full-bmc"), Version: "1001"},
			TriedCredentials: metal3.CredentialsStatus{Reference: secret("full-bmc"), Version: "1002"},
			ErrorMessage:     "detaching: node is locked",
			PoweredOn:        true,
			OperationHistory: metal3.OperationHistory{
				Register:    metal3.OperationMetric{Start: stamp(2), End: stamp(3)},
				Inspect:     metal3.OperationMetric{Start: stamp(4), End: stamp(5)},
				Provision:   metal3.OperationMetric{Start: stamp(6), End: stamp(7)},
				Deprovision: metal3.OperationMetric{Start: stamp(8), End: stamp(9)},
			},
			ErrorCount:                3,
			ProvisioningFailCount:     2,
			LastAttemptedImage:        &image,
			LastAttemptedCustomDeploy: &metal3.CustomDeploy{Method: "install_coreos"},
			Conditions: []metav1.Condition{
				condition(metal3.ManageableCondition, metal3.ManageableReason, 10),
				condition(metal3.ReadyCondition, metal3.ErrorReason, 11),
			},
		},
	}
}

func fullHardwareData(ns string) *metal3.HardwareData {
	hw := fullHardware()
	return &metal3.HardwareData{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec:       metal3.HardwareDataSpec{HardwareDetails: &hw},
	}
}

func fullPreprovisioningImage(ns string) *metal3.PreprovisioningImage {
	return &metal3.PreprovisioningImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: metal3.PreprovisioningImageSpec{
			NetworkDataName: "full-preprov-nd", Architecture: "x86_64",
			AcceptFormats: []metal3.ImageFormat{metal3.ImageFormatInitRD, metal3.ImageFormatISO},
		},
		Status: metal3.PreprovisioningImageStatus{
			ImageURL: "http://images.example.com/full.initramfs", KernelURL: "http://images.example.com/full.kernel",
			ExtraKernelParams: "coreos.live.rootfs_url=http://images.example.com/rootfs.img",
			Format:            metal3.ImageFormatInitRD,
			NetworkData:       metal3.SecretStatus{Name: "full-preprov-nd", Version: "4711"},
			Architecture:      "x86_64",
			Conditions: []metav1.Condition{
				condition(string(metal3.ConditionImageReady), metal3.ImageSuccessReason, 1),
				{Type: string(metal3.ConditionImageError), Status: metav1.ConditionFalse, ObservedGeneration: 1,
					LastTransitionTime: stamp(1), Reason: metal3.ImageSuccessReason, Message: "built"},
			},
		},
	}
}

func fullHostFirmwareSettings(ns string) *metal3.HostFirmwareSettings {
	return &metal3.HostFirmwareSettings{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: metal3.HostFirmwareSettingsSpec{Settings: metal3.DesiredSettingsMap{
			"ProcVirtualization": intstr.FromString("Enabled"),
			"SerialCommSettings": intstr.FromInt32(2),
		}},
		Status: metal3.HostFirmwareSettingsStatus{
			FirmwareSchema: &metal3.SchemaReference{Namespace: ns, Name: "schema-2f1a4c9e"},
			Settings:       metal3.SettingsMap{"ProcVirtualization": "Disabled", "SerialCommSettings": "0"},
			LastUpdated:    ptr.To(stamp(2)),
			Conditions: []metav1.Condition{
				condition(string(metal3.FirmwareSettingsChangeDetected), metal3.FirmwareSuccessReason, 3),
				condition(string(metal3.FirmwareSettingsValid), metal3.FirmwareSuccessReason, 3),
			},
		},
	}
}

func fullFirmwareSchema(ns string) *metal3.FirmwareSchema {
	return &metal3.FirmwareSchema{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "schema-full"},
		Spec: metal3.FirmwareSchemaSpec{
			HardwareVendor: "Dell Inc.", HardwareModel: "PowerEdge R650",
			Schema: map[string]metal3.SettingSchema{
				"Everything": {
					AttributeType: "Integer", AllowableValues: []string{"1", "2"}, LowerBound: ptr.To(1), UpperBound: ptr.To(2),
					MinLength: ptr.To(1), MaxLength: ptr.To(1), ReadOnly: ptr.To(false), ResetRequired: ptr.To(true), Unique: ptr.To(false),
				},
			},
		},
	}
}

func fullHostFirmwareComponents(ns string) *metal3.HostFirmwareComponents {
	updates := []metal3.FirmwareUpdate{{Component: "bios", URL: "http://fw.example.com/bios.exe"}, {Component: "nic:NIC.Integrated.1", URL: "http://fw.example.com/nic.bin"}}
	return &metal3.HostFirmwareComponents{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec:       metal3.HostFirmwareComponentsSpec{Updates: updates},
		Status: metal3.HostFirmwareComponentsStatus{
			Updates: updates,
			Components: []metal3.FirmwareComponentStatus{{
				Component: "bios", InitialVersion: "1.13.2", CurrentVersion: "1.14.1", LastVersionFlashed: "1.14.1", UpdatedAt: stamp(4),
			}},
			LastUpdated: ptr.To(stamp(5)),
			Conditions: []metav1.Condition{
				condition(string(metal3.HostFirmwareComponentsChangeDetected), metal3.FirmwareSuccessReason, 6),
				condition(string(metal3.HostFirmwareComponentsValid), metal3.FirmwareSuccessReason, 6),
			},
		},
	}
}

func fullHostUpdatePolicy(ns string) *metal3.HostUpdatePolicy {
	return &metal3.HostUpdatePolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: metal3.HostUpdatePolicySpec{
			FirmwareSettings: metal3.HostUpdatePolicyOnReboot, FirmwareUpdates: metal3.HostUpdatePolicyOnPreparing,
		},
	}
}

func fullDataImage(ns string) *metal3.DataImage {
	return &metal3.DataImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec:       metal3.DataImageSpec{URL: "http://images.example.com/data.iso"},
		Status: metal3.DataImageStatus{
			LastReconciled: ptr.To(stamp(7)),
			AttachedImage:  &metal3.AttachedImageReference{URL: "http://images.example.com/data.iso"},
			Error:          &metal3.DataImageError{Count: 1, Message: "virtual media busy"},
		},
	}
}

func fullBMCEventSubscription(ns string) *metal3.BMCEventSubscription {
	return &metal3.BMCEventSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: metal3.BMCEventSubscriptionSpec{
			HostName: "full", Destination: "https://alerts.example.com/events", Context: "rack-a",
			HTTPHeadersRef: &corev1.SecretReference{Name: "headers", Namespace: ns},
		},
		Status: metal3.BMCEventSubscriptionStatus{SubscriptionID: "sub-42", Error: "none yet"},
	}
}

func fullProvisioning(name string) *metal3.Provisioning {
	return &metal3.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: metal3.ProvisioningSpec{
			ProvisioningInterface:          "eth1",
			ProvisioningMacAddresses:       []string{"00:5c:52:31:3a:9c"},
			ProvisioningIP:                 "172.22.0.3",
			ProvisioningNetworkCIDR:        "172.22.0.0/24",
			ProvisioningDHCPExternal:       true,
			ProvisioningDHCPRange:          "172.22.0.10,172.22.0.254",
			ProvisioningNetworkGateway:     "172.22.0.1",
			ProvisioningOSDownloadURL:      "http://images.example.com/rhcos.qcow2.gz?sha256=" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ProvisioningNetwork:            metal3.ProvisioningNetworkUnmanaged,
			ProvisioningDNS:                true,
			AdditionalNTPServers:           []string{"0.pool.ntp.org"},
			WatchAllNamespaces:             true,
			BootIsoSource:                  metal3.BootIsoSourceHTTP,
			VirtualMediaViaExternalNetwork: true,
			PreprovisioningOSDownloadURLs: metal3.PreProvisioningOSDownloadURLs{
				IsoURL: "http://images.example.com/live.iso", KernelURL: "http://images.example.com/kernel",
				InitramfsURL: "http://images.example.com/initramfs", RootfsURL: "http://images.example.com/rootfs",
			},
			DisableVirtualMediaTLS:     true,
			UnsupportedConfigOverrides: &metal3.UnsupportedConfigOverrides{IronicAgentImage: "quay.io/example/ipa:latest"},
			PrometheusExporter: &metal3.PrometheusExporter{
				Enabled: true, SensorCollectionInterval: 90, DisableDefaultPrometheusRules: true,
			},
			ExternalIPs: []string{"192.0.2.10"},
		},
		Status: metal3.ProvisioningStatus{OperatorStatus: metal3.OperatorStatus{
			ObservedGeneration: 1,
			Conditions: []metal3.OperatorCondition{{
				Type: "Available", Status: metav1.ConditionTrue, LastTransitionTime: stamp(8), Reason: "AsExpected", Message: "deployed",
			}},
			Version:                 "4.20.0",
			ReadyReplicas:           1,
			LatestAvailableRevision: 3,
			Generations: []metal3.GenerationStatus{{
				Group: "apps", Resource: "deployments", Namespace: "openshift-machine-api", Name: "metal3",
				LastGeneration: 7, Hash: "abc123",
			}},
		}},
	}
}
