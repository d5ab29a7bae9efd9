package webhooks

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

const osImageURL = "http://172.22.0.1/images/rhcos-44.81.202001171431.0-openstack.x86_64.qcow2.gz?sha256=e98f83a2b9d4043719664a2be75fe8134dc6ca1fdbde807996622f8cc7ecd234"

// managedProvisioning is the cluster baremetal operator's own Managed example.
func managedProvisioning() *metal3.Provisioning {
	return &metal3.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName},
		Spec: metal3.ProvisioningSpec{
			ProvisioningInterface:     "eth0",
			ProvisioningIP:            "172.30.20.3",
			ProvisioningNetworkCIDR:   "172.30.20.0/24",
			ProvisioningDHCPRange:     "172.30.20.11, 172.30.20.101",
			ProvisioningOSDownloadURL: osImageURL,
			ProvisioningNetwork:       metal3.ProvisioningNetworkManaged,
		},
	}
}

func TestValidateProvisioning(t *testing.T) {
	const spec = "spec."
	tests := map[string]struct {
		mutate func(*metal3.ProvisioningSpec)
		want   []string
		detail string
	}{
		"managed":                  {mutate: func(*metal3.ProvisioningSpec) {}},
		"managed by default":       {mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetwork = "" }},
		"managed without OS image": {mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningOSDownloadURL = "" }},
		"managed with MACs, no interface": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningInterface = ""
			s.ProvisioningMacAddresses = []string{"00:5a:91:3f:9a:bd", "00:5a:91:3f:9a:be"}
		}},
		"managed with a gateway": {mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.30.20.1" }},
		"managed IPv6 /64": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningDHCPRange = "fd00:1101::3", "fd00:1101::/64", "fd00:1101::a,fd00:1101::ffff"
		}},
		"unknown mode": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetwork = "Bridged" },
			want:   []string{spec + "provisioningNetwork: Unsupported value"}, detail: `"Managed", "Unmanaged", "Disabled"`,
		},
		"managed IPv6 larger than /64": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningDHCPRange = "fd00:1101::3", "fd00:1101::/48", "fd00:1101::a,fd00:1101::ffff"
			},
			want: []string{spec + "provisioningNetworkCIDR: Invalid value"}, detail: "/64 or longer",
		},
		"provisioning IP in the DHCP range": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "172.30.20.20" },
			want:   []string{spec + "provisioningIP: Invalid value"}, detail: "outside provisioningDHCPRange",
		},
		"provisioning IP outside the CIDR": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "172.30.30.3" },
			want:   []string{spec + "provisioningIP: Invalid value"}, detail: `inside provisioningNetworkCIDR "172.30.20.0/24"`,
		},
		"provisioning IP is the network address": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "172.30.20.0" },
			want:   []string{spec + "provisioningIP: Invalid value"}, detail: "network or broadcast",
		},
		"provisioning IP is the broadcast address": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "172.30.20.255" },
			want:   []string{spec + "provisioningIP: Invalid value"}, detail: "network or broadcast",
		},
		"provisioning IP missing": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "" },
			want:   []string{spec + "provisioningIP: Required value"},
		},
		"provisioning IP not an IP": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "172.30.20.500" },
			want:   []string{spec + "provisioningIP: Invalid value"}, detail: "IPv4 or IPv6 address",
		},
		"CIDR missing": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkCIDR = "" },
			want:   []string{spec + "provisioningNetworkCIDR: Required value"},
		},
		"CIDR not a CIDR": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkCIDR = "172.30.20.0/33" },
			want:   []string{spec + "provisioningNetworkCIDR: Invalid value"},
		},
		"DHCP range missing": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningDHCPRange = "" },
			want:   []string{spec + "provisioningDHCPRange: Required value"}, detail: "Managed",
		},
		"DHCP range with a colon": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.30.20.11:172.30.30.100" },
			want:   []string{spec + "provisioningDHCPRange: Invalid value"}, detail: `"start,end"`,
		},
		"DHCP range with a bad address": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.30.20.11, 172.30.20.xxx" },
			want:   []string{spec + "provisioningDHCPRange: Invalid value"}, detail: "172.30.20.xxx",
		},
		"DHCP range outside the CIDR": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.30.30.11, 172.30.30.100" },
			want:   []string{spec + "provisioningDHCPRange: Invalid value", spec + "provisioningDHCPRange: Invalid value"},
		},
		"DHCP range inverted": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningDHCPRange = "172.30.20.101,172.30.20.11" },
			want:   []string{spec + "provisioningDHCPRange: Invalid value"}, detail: "start address",
		},
		"gateway outside the CIDR": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.30.21.1" },
			want:   []string{spec + "provisioningNetworkGateway: Invalid value"}, detail: "inside provisioningNetworkCIDR",
		},
		"gateway is the provisioning IP": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.30.20.3" },
			want:   []string{spec + "provisioningNetworkGateway: Invalid value"}, detail: "differ from provisioningIP",
		},
		"gateway is the broadcast address": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.30.20.255" },
			want:   []string{spec + "provisioningNetworkGateway: Invalid value"}, detail: "network or broadcast",
		},
		"gateway in the DHCP range": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.30.20.50" },
			want:   []string{spec + "provisioningNetworkGateway: Invalid value"}, detail: "outside provisioningDHCPRange",
		},
		"gateway not an IP": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "router" },
			want:   []string{spec + "provisioningNetworkGateway: Invalid value"},
		},
		"IPv4 /31, both addresses are hosts": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningNetworkGateway = "10.0.0.0", "10.0.0.0/31", "10.0.0.1"
			s.ProvisioningDHCPRange = "10.0.0.1,10.0.0.1"
		}, want: []string{spec + "provisioningNetworkGateway: Invalid value"}, detail: "outside provisioningDHCPRange"},
		"IPv6 gateway, no broadcast address": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningDHCPRange = "fd00::3", "fd00::/64", "fd00::a,fd00::ff"
			s.ProvisioningNetworkGateway = "fd00::ffff:ffff:ffff:ffff"
		}},

		"unmanaged": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningNetwork = metal3.ProvisioningNetworkUnmanaged
			s.ProvisioningDHCPRange = ""
		}},
		"unmanaged by provisioningDHCPExternal": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningNetwork = ""
			s.ProvisioningDHCPExternal = true
			s.ProvisioningDHCPRange = ""
		}},
		"unmanaged ignores the DHCP range": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningNetwork = metal3.ProvisioningNetworkUnmanaged
			s.ProvisioningDHCPRange = "172.30.20.2,172.30.20.5"
		}},
		"unmanaged IPv6 larger than /64": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningNetwork = metal3.ProvisioningNetworkUnmanaged
			s.ProvisioningIP, s.ProvisioningNetworkCIDR, s.ProvisioningDHCPRange = "fd00:1101::3", "fd00:1101::/48", ""
		}},
		"unmanaged provisioning IP outside the CIDR": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningNetwork = metal3.ProvisioningNetworkUnmanaged
				s.ProvisioningIP = "172.30.30.3"
			},
			want: []string{spec + "provisioningIP: Invalid value"},
		},
		"unmanaged with a gateway": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningNetwork = metal3.ProvisioningNetworkUnmanaged
				s.ProvisioningNetworkGateway = "172.30.20.1"
			},
			want: []string{spec + "provisioningNetworkGateway: Forbidden"}, detail: `only used when provisioningNetwork is "Managed"`,
		},

		"disabled with a network": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningNetwork = metal3.ProvisioningNetworkDisabled
			s.ProvisioningInterface, s.ProvisioningDHCPRange = "", ""
		}},
		"disabled without a network": {mutate: func(s *metal3.ProvisioningSpec) {
			*s = metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}
		}},
		"disabled with an IP only": {mutate: func(s *metal3.ProvisioningSpec) {
			*s = metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled, ProvisioningIP: "192.168.111.5"}
		}},
		"disabled with a CIDR only": {
			mutate: func(s *metal3.ProvisioningSpec) {
				*s = metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled, ProvisioningNetworkCIDR: "172.30.20.0/24"}
			},
			want: []string{spec + "provisioningIP: Required value"},
		},
		"disabled with a bad IP": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningNetwork = metal3.ProvisioningNetworkDisabled
				s.ProvisioningIP = "172.30.20"
			},
			want: []string{spec + "provisioningIP: Invalid value"},
		},
		"disabled with a gateway": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningNetwork = metal3.ProvisioningNetworkDisabled
				s.ProvisioningNetworkGateway = "172.30.20.1"
			},
			want: []string{spec + "provisioningNetworkGateway: Forbidden"},
		},

		"OS image URL not http": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningOSDownloadURL = "gopher://172.22.0.1/images/rhcos.qcow2.gz?sha256=e98f83a2b9d4043719664a2be75fe8134dc6ca1fdbde807996622f8cc7ecd234"
			},
			want: []string{spec + "provisioningOSDownloadURL: Invalid value"}, detail: ".qcow2.gz or .qcow2.xz",
		},
		"OS image URL not a URL": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningOSDownloadURL = "rhcos.qcow2.gz" },
			want:   []string{spec + "provisioningOSDownloadURL: Invalid value"},
		},
		"OS image URL without checksum": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningOSDownloadURL = "http://172.22.0.1/images/rhcos.qcow2.gz"
			},
			want: []string{spec + "provisioningOSDownloadURL: Invalid value"}, detail: "sha256 query parameter is missing",
		},
		"OS image URL with a short checksum": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningOSDownloadURL = "http://172.22.0.1/images/rhcos.qcow2.gz?sha256=sputnik"
			},
			want: []string{spec + "provisioningOSDownloadURL: Invalid value"}, detail: "64 hexadecimal digits",
		},
		"OS image URL with a non-hex checksum": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningOSDownloadURL = "http://172.22.0.1/images/rhcos.qcow2.gz?sha256=z98f83a2b9d4043719664a2be75fe8134dc6ca1fdbde807996622f8cc7ecd234"
			},
			want: []string{spec + "provisioningOSDownloadURL: Invalid value"}, detail: "hexadecimal",
		},
		"OS image URL of a zip": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningOSDownloadURL = "http://172.22.0.1/images/rhcos.qcow2.zip?sha256=e98f83a2b9d4043719664a2be75fe8134dc6ca1fdbde807996622f8cc7ecd234"
			},
			want: []string{spec + "provisioningOSDownloadURL: Invalid value"}, detail: "must end in .qcow2.gz or .qcow2.xz",
		},
		"OS image URL, xz": {mutate: func(s *metal3.ProvisioningSpec) {
			s.ProvisioningOSDownloadURL = "https://mirror.example.com/rhcos.qcow2.xz?sha256=E98F83A2B9D4043719664A2BE75FE8134DC6CA1FDBDE807996622F8CC7ECD234"
		}},
		"preprovisioning OS URLs": {mutate: func(s *metal3.ProvisioningSpec) {
			s.PreprovisioningOSDownloadURLs = metal3.PreProvisioningOSDownloadURLs{
				IsoURL:       "https://mirror.example.com/rhcos-live.x86_64.iso",
				KernelURL:    "https://mirror.example.com/rhcos-live-kernel-x86_64",
				InitramfsURL: "https://mirror.example.com/rhcos-live-initramfs.x86_64.img",
				RootfsURL:    "https://mirror.example.com/rhcos-live-rootfs.x86_64.img",
			}
		}},
		"preprovisioning OS URLs that are not http(s)": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.PreprovisioningOSDownloadURLs = metal3.PreProvisioningOSDownloadURLs{IsoURL: "rhcos-live.iso", KernelURL: "ftp://mirror/kernel"}
			},
			want: []string{spec + "preProvisioningOSDownloadURLs.isoURL: Invalid value", spec + "preProvisioningOSDownloadURLs.kernelURL: Invalid value"},
		},
		"interface name too long": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningInterface = "enp0s20f0u1u2u3u4" },
			want:   []string{spec + "provisioningInterface: Invalid value"}, detail: "at most 15 characters",
		},
		"interface name with a slash": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningInterface = "eth0/1" },
			want:   []string{spec + "provisioningInterface: Invalid value"}, detail: "no slash",
		},
		"interface name with a VLAN dot": {mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningInterface = "bond0.100" }},
		"NTP servers by name and address": {mutate: func(s *metal3.ProvisioningSpec) {
			s.AdditionalNTPServers = []string{"0.pool.ntp.org", "NTP.Example.COM", "192.168.1.1", "fd00::1"}
		}},
		"NTP server that is neither": {
			mutate: func(s *metal3.ProvisioningSpec) { s.AdditionalNTPServers = []string{"0.pool.ntp.org", "ntp server"} },
			want:   []string{spec + "additionalNTPServers[1]: Invalid value"}, detail: "IP address or a DNS name",
		},
		"boot ISO source http": {mutate: func(s *metal3.ProvisioningSpec) { s.BootIsoSource = metal3.BootIsoSourceHTTP }},
		"boot ISO source unknown": {
			mutate: func(s *metal3.ProvisioningSpec) { s.BootIsoSource = "nfs" },
			want:   []string{spec + "bootIsoSource: Unsupported value"}, detail: `"local", "http"`,
		},
		"agent image override": {mutate: func(s *metal3.ProvisioningSpec) {
			s.UnsupportedConfigOverrides = &metal3.UnsupportedConfigOverrides{IronicAgentImage: "quay.io/metal3-io/ironic-agent:v1.2"}
		}},
		"agent image override without a tag (latest)": {mutate: func(s *metal3.ProvisioningSpec) {
			s.UnsupportedConfigOverrides = &metal3.UnsupportedConfigOverrides{IronicAgentImage: "quay.io/metal3-io/ironic-agent"}
		}},
		"agent image override not an image": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.UnsupportedConfigOverrides = &metal3.UnsupportedConfigOverrides{IronicAgentImage: "Quay.io/Agent Image"}
			},
			want: []string{spec + "unsupportedConfigOverrides.ironicAgentImage: Invalid value"}, detail: "container image reference",
		},
		"sensor interval below the minimum": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.PrometheusExporter = &metal3.PrometheusExporter{Enabled: true, SensorCollectionInterval: 30}
			},
			want: []string{spec + "prometheusExporter.sensorCollectionInterval: Invalid value"}, detail: "at least 60 seconds",
		},
		"sensor interval defaulted": {mutate: func(s *metal3.ProvisioningSpec) {
			s.PrometheusExporter = &metal3.PrometheusExporter{Enabled: true}
		}},
		// The runner finds the interface holding the provisioning IP when neither is given.
		"managed without interface or MACs": {mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningInterface = "" }},
		"provisioning IP in IPv4-mapped form": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningIP = "::ffff:172.30.20.3" },
			want:   []string{spec + "provisioningIP: Invalid value"}, detail: "IPv4-mapped IPv6 address: write it as 172.30.20.3",
		},
		"disabled, provisioning IP in IPv4-mapped form": {
			mutate: func(s *metal3.ProvisioningSpec) {
				*s = metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled, ProvisioningIP: "::ffff:192.168.111.5"}
			},
			want: []string{spec + "provisioningIP: Invalid value"}, detail: "write it as 192.168.111.5",
		},
		"gateway in IPv4-mapped form": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "::ffff:172.30.20.1" },
			want:   []string{spec + "provisioningNetworkGateway: Invalid value"}, detail: "IPv4-mapped",
		},
		"DHCP range in IPv4-mapped form": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ProvisioningDHCPRange = "::ffff:172.30.20.11,172.30.20.101" },
			want:   []string{spec + "provisioningDHCPRange: Invalid value"}, detail: "IPv4-mapped",
		},
		"external IP in IPv4-mapped form": {
			mutate: func(s *metal3.ProvisioningSpec) { s.ExternalIPs = []string{"192.168.111.2", "::ffff:192.168.111.3"} },
			want:   []string{spec + "externalIPs[1]: Invalid value"}, detail: "write it as 192.168.111.3",
		},
		"bad provisioning MAC and external IP": {
			mutate: func(s *metal3.ProvisioningSpec) {
				s.ProvisioningMacAddresses = []string{"00:5a:91:3f:9a:bd", "00:5a:91"}
				s.ExternalIPs = []string{"192.168.111.2", "eth0"}
			},
			want: []string{spec + "provisioningMacAddresses[1]: Invalid value", spec + "externalIPs[1]: Invalid value"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			prov := managedProvisioning()
			tc.mutate(&prov.Spec)
			checkErrors(t, ValidateProvisioning(prov), tc.want, tc.detail)
		})
	}
}

func TestValidateProvisioningOn(t *testing.T) {
	cloud := []metal3.ProvisioningNetwork{metal3.ProvisioningNetworkDisabled}
	all := []metal3.ProvisioningNetwork{metal3.ProvisioningNetworkManaged, metal3.ProvisioningNetworkUnmanaged, metal3.ProvisioningNetworkDisabled}
	disabled := func() *metal3.Provisioning {
		return &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName},
			Spec: metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}}
	}
	implicitManaged := managedProvisioning()
	implicitManaged.Spec.ProvisioningNetwork = ""
	for name, tc := range map[string]struct {
		prov     *metal3.Provisioning
		platform string
		modes    []metal3.ProvisioningNetwork
		want     []string
		detail   string
	}{
		"managed on bare metal":      {prov: managedProvisioning(), platform: "BareMetal", modes: all},
		"disabled on a cloud":        {prov: disabled(), platform: "AWS", modes: cloud},
		"managed on a cloud":         {prov: managedProvisioning(), platform: "AWS", modes: cloud, want: []string{"spec.provisioningNetwork: Invalid value"}, detail: `"Managed" is not supported on platform AWS: use "Disabled"`},
		"empty mode on a cloud":      {prov: implicitManaged, platform: "VSphere", modes: cloud, want: []string{"spec.provisioningNetwork: Invalid value"}, detail: `empty, which means "Managed"`},
		"no modes known: no rule":    {prov: managedProvisioning(), platform: "Nutanix"},
		"spec errors are kept too":   {prov: func() *metal3.Provisioning { p := managedProvisioning(); p.Spec.ProvisioningIP = ""; return p }(), platform: "BareMetal", modes: all, want: []string{"spec.provisioningIP: Required value"}},
		"unknown mode reported once": {prov: func() *metal3.Provisioning { p := disabled(); p.Spec.ProvisioningNetwork = "Bridged"; return p }(), platform: "AWS", modes: cloud, want: []string{"spec.provisioningNetwork: Unsupported value"}},
	} {
		t.Run(name, func(t *testing.T) {
			checkErrors(t, ValidateProvisioningOn(tc.prov, tc.platform, tc.modes), tc.want, tc.detail)
		})
	}
}

func TestValidateProvisioningCreate(t *testing.T) {
	prov := managedProvisioning()
	checkErrors(t, ValidateProvisioningCreate(prov), nil, "")

	prov.Name = "my-provisioning"
	checkErrors(t, ValidateProvisioningCreate(prov), []string{"metadata.name: Invalid value"}, `must be named "provisioning-configuration"`)
}

func TestProvisioningNetworkMode(t *testing.T) {
	tests := map[string]struct {
		spec metal3.ProvisioningSpec
		want metal3.ProvisioningNetwork
	}{
		"empty":              {want: metal3.ProvisioningNetworkManaged},
		"DHCP external":      {spec: metal3.ProvisioningSpec{ProvisioningDHCPExternal: true}, want: metal3.ProvisioningNetworkUnmanaged},
		"explicit mode wins": {spec: metal3.ProvisioningSpec{ProvisioningDHCPExternal: true, ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}, want: metal3.ProvisioningNetworkDisabled},
		"explicit managed":   {spec: metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkManaged}, want: metal3.ProvisioningNetworkManaged},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ProvisioningNetworkMode(&tc.spec); got != tc.want {
				t.Errorf("ProvisioningNetworkMode() = %q, want %q", got, tc.want)
			}
		})
	}
}

// An enabled prometheusExporter is accepted with a warning that it does nothing here, once (not at
// every later update).
func TestPrometheusExporterWarning(t *testing.T) {
	t.Parallel()
	withInterface := func() *metal3.Provisioning {
		return &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName},
			Spec: metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkManaged, ProvisioningInterface: "eth1"}}
	}
	on := withInterface()
	on.Spec.PrometheusExporter = &metal3.PrometheusExporter{Enabled: true}
	if w := provisioningWarnings(nil, on); len(w) != 1 || !strings.Contains(w[0], "spec.prometheusExporter.enabled") {
		t.Errorf("create with the exporter enabled: warnings %q", w)
	}
	if w := provisioningWarnings(on, on); len(w) != 0 {
		t.Errorf("an update that leaves it enabled: warnings %q", w)
	}
	if w := provisioningWarnings(nil, withInterface()); len(w) != 0 {
		t.Errorf("create without the exporter: warnings %q", w)
	}
}

// A network without interface or MACs is accepted, with a warning when an update makes it so.
func TestProvisioningInterfaceWarning(t *testing.T) {
	v := &ProvisioningValidator{}
	prov := func(mode metal3.ProvisioningNetwork, iface string) *metal3.Provisioning {
		return &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName},
			Spec: metal3.ProvisioningSpec{ProvisioningNetwork: mode, ProvisioningInterface: iface}}
	}
	if w := provisioningWarnings(nil, prov(metal3.ProvisioningNetworkManaged, "")); len(w) != 1 || !strings.Contains(w[0], "spec.provisioningInterface") {
		t.Errorf("create without interface: warnings %q", w)
	}
	if w := provisioningWarnings(nil, prov(metal3.ProvisioningNetworkManaged, "eth1")); len(w) != 0 {
		t.Errorf("create with an interface: warnings %q", w)
	}
	if w := provisioningWarnings(nil, prov(metal3.ProvisioningNetworkDisabled, "")); len(w) != 0 {
		t.Errorf("Disabled needs no interface: warnings %q", w)
	}
	if w := provisioningWarnings(prov(metal3.ProvisioningNetworkUnmanaged, ""), prov(metal3.ProvisioningNetworkUnmanaged, "")); len(w) != 0 {
		t.Errorf("an unrelated update repeats the warning: %q", w)
	}
	if w, _ := v.ValidateUpdate(context.Background(), prov(metal3.ProvisioningNetworkManaged, "eth1"), prov(metal3.ProvisioningNetworkManaged, "")); len(w) != 1 {
		t.Errorf("update removing the interface: warnings %q", w)
	}
}
