package ironicrunner

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestFromEnv(t *testing.T) {
	for name, tc := range map[string]struct {
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		"defaults": {env: map[string]string{}, check: func(t *testing.T, c Config) {
			t.Helper()
			if c.APIPort != 6385 || c.HTTPPort != 6180 || c.VMediaTLSPort != 0 || !c.FastTrack || !c.ListenAll || c.Insecure || c.KernelIPFromAddresses ||
				c.SharedDir != "/shared" || c.DataDir != "/var/lib/ironic" || c.ConfDir != "/etc/ironic" {
				t.Errorf("defaults %+v", c)
			}
		}},
		"IP with prefix": {env: map[string]string{"PROVISIONING_IP": "172.22.0.3/24", "PROVISIONING_MACS": "00:5A:91:3F:9A:BD, 00:5a:91:3f:9a:be"}, check: func(t *testing.T, c Config) {
			t.Helper()
			if c.ProvisioningIP != netip.MustParseAddr("172.22.0.3") || c.Prefix != 24 || !slices.Equal(c.MACs, []string{"00:5a:91:3f:9a:bd", "00:5a:91:3f:9a:be"}) {
				t.Errorf("%+v", c)
			}
		}},
		"plain IPv6": {env: map[string]string{"PROVISIONING_IP": "fd00::3", "IRONIC_EXTERNAL_IP": "10.0.0.5", "IRONIC_INSECURE": "true", "VMEDIA_TLS_PORT": "6183",
			"IRONIC_KERNEL_IP_FROM_ADDRESSES": "true"}, check: func(t *testing.T, c Config) {
			t.Helper()
			if c.ProvisioningIP != netip.MustParseAddr("fd00::3") || c.Prefix != 0 || c.ExternalIP.String() != "10.0.0.5" || !c.Insecure || c.VMediaTLSPort != 6183 ||
				!c.KernelIPFromAddresses {
				t.Errorf("%+v", c)
			}
		}},
		"the htpasswd under its older name": {env: map[string]string{"HTTP_BASIC_HTPASSWD": "u:$2y$05$x"}, check: func(t *testing.T, c Config) {
			t.Helper()
			if c.Htpasswd != "u:$2y$05$x" {
				t.Errorf("htpasswd %q", c.Htpasswd)
			}
		}},
		"IRONIC_HTPASSWD first": {env: map[string]string{"IRONIC_HTPASSWD": "a:1", "HTTP_BASIC_HTPASSWD": "b:2"}, check: func(t *testing.T, c Config) {
			t.Helper()
			if c.Htpasswd != "a:1" {
				t.Errorf("htpasswd %q", c.Htpasswd)
			}
		}},
		"bad values named": {env: map[string]string{"PROVISIONING_IP": "eth0", "HTTP_PORT": "80000", "IRONIC_FAST_TRACK": "sometimes", "PROVISIONING_MACS": "xx", "IRONIC_CERT_FILE": "/c"},
			wantErr: "PROVISIONING_IP"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := FromEnv(env(tc.env))
			if tc.wantErr != "" {
				for _, v := range []string{"PROVISIONING_IP", "HTTP_PORT", "IRONIC_FAST_TRACK", "PROVISIONING_MACS", "IRONIC_KEY_FILE"} {
					if err == nil || !strings.Contains(err.Error(), v) {
						t.Errorf("error %v does not name %s", err, v)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestIronicIP(t *testing.T) {
	links := []Link{
		{Name: "lo", Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Name: "eth0", MAC: "52:54:00:00:00:01", Addrs: []netip.Prefix{netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix("192.168.111.10/24")}},
		{Name: "eth1", MAC: "52:54:00:00:00:02", Addrs: []netip.Prefix{netip.MustParsePrefix("172.22.0.3/24")}},
		{Name: "eth2", MAC: "52:54:00:00:00:03"},
	}
	for name, tc := range map[string]struct {
		c       Config
		want    string
		waiting bool
		err     string
	}{
		"provisioning IP present": {c: Config{ProvisioningIP: netip.MustParseAddr("172.22.0.3")}, want: "172.22.0.3"},
		"provisioning IP not yet": {c: Config{ProvisioningIP: netip.MustParseAddr("172.22.0.4")}, waiting: true},
		"by interface":            {c: Config{Interface: "eth0"}, want: "192.168.111.10"},
		"by MAC":                  {c: Config{MACs: []string{"52:54:00:00:00:02"}}, want: "172.22.0.3"},
		"interface without an IP": {c: Config{Interface: "eth2"}, waiting: true},
		"unknown MAC":             {c: Config{MACs: []string{"52:54:00:00:00:09"}}, waiting: true},
		"nothing to find it with": {c: Config{}, err: "PROVISIONING_IP, PROVISIONING_INTERFACE or PROVISIONING_MACS"},
	} {
		t.Run(name, func(t *testing.T) {
			ip, err := IronicIP(tc.c, links)
			switch {
			case tc.want != "":
				if err != nil || ip.String() != tc.want {
					t.Fatalf("IronicIP = %s, %v; want %s", ip, err, tc.want)
				}
			case tc.waiting:
				if !errors.Is(err, errNoAddress) {
					t.Fatalf("err %v: want errNoAddress", err)
				}
			default:
				if err == nil || errors.Is(err, errNoAddress) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v: want %q", err, tc.err)
				}
			}
		})
	}
}

func TestIronicConf(t *testing.T) {
	base := Config{APIPort: 6385, HTTPPort: 6180, SharedDir: "/shared", DataDir: "/var/lib/ironic", ConfDir: "/etc/ironic", FastTrack: true, ListenAll: true,
		CertFile: "/certs/ironic/tls.crt", KeyFile: "/certs/ironic/tls.key"}
	v4 := netip.MustParseAddr("192.168.111.10")
	for name, tc := range map[string]struct {
		c     func(Config) Config
		ip    netip.Addr
		tls   bool
		want  []string
		avoid []string
	}{
		"TLS, basic auth, vmedia TLS": {
			c: func(c Config) Config {
				c.Htpasswd, c.VMediaTLSPort, c.Insecure = "ironic-user:$2y$05$x", 6183, true
				return c
			},
			ip: v4, tls: true,
			want: []string{"auth_strategy = http_basic", "http_basic_auth_user_file = /etc/ironic/htpasswd", "enable_ssl_api = true",
				"cert_file = /certs/ironic/tls.crt", "host_ip = ::", "endpoint_override = https://192.168.111.10:6385",
				"http_url = http://192.168.111.10:6180", "external_http_url = https://192.168.111.10:6183", "ipa-insecure=1",
				"connection = sqlite:////var/lib/ironic/ironic.sqlite", "file_url_allowed_paths = /var/lib/ironic,/shared,/templates",
				"periodic_max_workers = 128", "webserver_verify_ca = False",
				// metal3's image's values.
				"erase_devices_metadata_priority = 10", "erase_devices_priority = 0", "deploy_callback_timeout = 4800",
				"power_state_change_timeout = 120", "boot_retry_timeout = 1200", "max_command_attempts = 30"},
			avoid: []string{"external_callback_url", "$2y$"},
		},
		"no TLS, no auth": {
			c: func(c Config) Config { return c }, ip: v4,
			want:  []string{"auth_strategy = noauth", "endpoint_override = http://192.168.111.10:6385", "erase_devices_priority = 0"},
			avoid: []string{"enable_ssl_api", "http_basic_auth_user_file", "external_http_url", "ipa-insecure", "webserver_verify_ca"},
		},
		"the image servers' CA": {
			c: func(c Config) Config { c.WebserverCACert, c.Insecure = "/certs/ca/trusted.crt", true; return c }, ip: v4,
			want: []string{"webserver_verify_ca = /certs/ca/trusted.crt"},
		},
		"every address without IPv6 in the kernel": {
			c: func(c Config) Config { c.NoIPv6 = true; return c }, ip: v4,
			want: []string{"host_ip = 0.0.0.0"},
		},
		"IPv6, external IP, one address only": {
			c: func(c Config) Config {
				c.ExternalIP, c.ListenAll, c.KernelParams = netip.MustParseAddr("fd00::5"), false, "ip=dhcp6"
				return c
			},
			ip: netip.MustParseAddr("fd00:1101::3"), tls: true,
			want: []string{"host_ip = fd00:1101::3", "http_url = http://[fd00:1101::3]:6180", "external_callback_url = https://[fd00::5]:6385",
				"external_http_url = http://[fd00::5]:6180", "kernel_append_params = nofb vga=normal ip=dhcp6"},
		},
		// The cluster-baremetal-operator asks for ip= from the addresses when Ironic's is the
		// node's (status.hostIP), which only the running pod knows: an IPv6 node gets DHCPv6.
		"the agent's ip= from Ironic's IPv6 address": {
			c: func(c Config) Config {
				c.KernelParams, c.KernelIPFromAddresses = "rd.net.timeout.carrier=30", true
				return c
			},
			ip:    netip.MustParseAddr("fd00::10"),
			want:  []string{"kernel_append_params = nofb vga=normal rd.net.timeout.carrier=30 ip=dhcp6"},
			avoid: []string{"ip=dhcp "},
		},
		"the agent's ip= from Ironic's IPv4 address": {
			c: func(c Config) Config { c.KernelIPFromAddresses = true; return c }, ip: v4,
			want: []string{"kernel_append_params = nofb vga=normal ip=dhcp"},
		},
		"the agent's ip= from an IPv4 Ironic and an IPv6 external address": {
			c: func(c Config) Config {
				c.ExternalIP, c.KernelIPFromAddresses = netip.MustParseAddr("fd00::5"), true
				return c
			},
			ip:   v4,
			want: []string{"kernel_append_params = nofb vga=normal ip=dhcp,dhcp6"},
		},
		"no ip= unless asked": {
			c: func(c Config) Config { c.KernelParams = "console=ttyS0"; return c }, ip: netip.MustParseAddr("fd00::10"),
			want:  []string{"kernel_append_params = nofb vga=normal console=ttyS0"},
			avoid: []string{"ip=dhcp"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			conf := IronicConf(tc.c(base), tc.ip, tc.tls)
			for _, w := range tc.want {
				if !strings.Contains(conf, w+"\n") && !strings.Contains(conf, w+" ") {
					t.Errorf("ironic.conf lacks %q:\n%s", w, conf)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(conf, a) {
					t.Errorf("ironic.conf has %q", a)
				}
			}
		})
	}
}

func TestDnsmasqConf(t *testing.T) {
	c := Config{HTTPPort: 6180, SharedDir: "/shared", Prefix: 24, DHCPRange: "172.22.0.10,172.22.0.100,24", Gateway: "172.22.0.1", DNS: "provisioning"}
	conf, err := DnsmasqConf(c, netip.MustParseAddr("172.22.0.3"), "eth1")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"interface=eth1", "dhcp-range=172.22.0.10,172.22.0.100,255.255.255.0", "dhcp-option=3,172.22.0.1",
		"dhcp-option=6,172.22.0.3", "dhcp-boot=tag:ipxe,http://172.22.0.3:6180/boot.ipxe", "port=0", "tftp-root=/shared/tftpboot",
		// UEFI clients (x86-64: client architectures 7 and 9) get the EFI loader, legacy BIOS
		// ones the BIOS loader, which they can run.
		"dhcp-match=set:efi,option:client-arch,7", "dhcp-match=set:efi,option:client-arch,9",
		"dhcp-boot=tag:efi,tag:!ipxe,snponly.efi", "dhcp-boot=tag:!efi,tag:!ipxe,undionly.kpxe"} {
		if !strings.Contains(conf, w+"\n") {
			t.Errorf("lacks %q:\n%s", w, conf)
		}
	}
	if strings.Contains(conf, "dhcp-boot=tag:!ipxe,") {
		t.Errorf("a dhcp-boot line sends every non-iPXE client one loader:\n%s", conf)
	}
	c6 := Config{HTTPPort: 6180, SharedDir: "/shared", DHCPRange: "fd00:1101::a,fd00:1101::ffff,64"}
	conf, err = DnsmasqConf(c6, netip.MustParseAddr("fd00:1101::3"), "eth1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conf, "dhcp-range=fd00:1101::a,fd00:1101::ffff,64\n") || !strings.Contains(conf, "http://[fd00:1101::3]:6180/boot.ipxe") {
		t.Errorf("IPv6:\n%s", conf)
	}
	// Router advertisements announce the prefix but not a default route through the provisioning
	// network (router lifetime 0), as the IPv4 side hands out no gateway (dhcp-option=3); without
	// ra-param dnsmasq advertises itself as default router for 1800 s.
	for _, w := range []string{"enable-ra", "ra-param=eth1,0,0"} {
		if !strings.Contains(conf, w+"\n") {
			t.Errorf("IPv6 lacks %q:\n%s", w, conf)
		}
	}
	if _, err := DnsmasqConf(Config{DHCPRange: "172.22.0.10"}, netip.MustParseAddr("172.22.0.3"), "eth1"); err == nil {
		t.Error("a one-address range was accepted")
	}
	if _, err := DnsmasqConf(Config{DHCPRange: "172.22.0.10,fd00::1"}, netip.MustParseAddr("172.22.0.3"), "eth1"); err == nil {
		t.Error("a mixed-family range was accepted")
	}
}

func TestFileHandler(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "images", "agent.kernel"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(root), "outside"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(FileHandler(root))
	defer srv.Close()
	get := func(path, rng string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for name, tc := range map[string]struct {
		path, rng, body string
		code            int
	}{
		"file":         {path: "/images/agent.kernel", code: 200, body: "0123456789"},
		"range":        {path: "/images/agent.kernel", rng: "bytes=2-4", code: 206, body: "234"},
		"no listing":   {path: "/images/", code: 404},
		"root listing": {path: "/", code: 404},
		"escape":       {path: "/../outside", code: 404},
		"missing":      {path: "/images/nope", code: 404},
		"health":       {path: "/healthz", code: 200, body: "ok"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := get(tc.path, tc.rng)
			if code != tc.code || (tc.body != "" && body != tc.body) || strings.Contains(body, "secret") {
				t.Fatalf("GET %s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
			}
		})
	}
	resp, err := http.Post(srv.URL+"/images/agent.kernel", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// TestDnsmasqTFTPOnly: without DHCP_RANGE (an Unmanaged provisioning network) dnsmasq serves the
// iPXE loaders over TFTP on the provisioning interface, and no DHCP; a malformed range is still an
// error.
func TestDnsmasqTFTPOnly(t *testing.T) {
	conf, err := DnsmasqConf(Config{SharedDir: "/shared"}, netip.MustParseAddr("172.22.0.3"), "eth1")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"port=0\n", "interface=eth1\n", "enable-tftp\n", "tftp-root=/shared/tftpboot\n"} {
		if !strings.Contains(conf, w) {
			t.Errorf("TFTP-only config lacks %q:\n%s", w, conf)
		}
	}
	if strings.Contains(conf, "dhcp-") {
		t.Errorf("TFTP-only config serves DHCP:\n%s", conf)
	}
	if _, err := DnsmasqConf(Config{DHCPRange: "172.22.0.10"}, netip.MustParseAddr("172.22.0.3"), "eth1"); err == nil {
		t.Error("a range without its end was accepted")
	}
}

// TestReadMountedHtpasswd: the mounted htpasswd is read when there; none is no error; an unreadable
// one is (the API would otherwise start without authentication).
func TestReadMountedHtpasswd(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(file, []byte("ironic:$2y$05$x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := readMountedHtpasswd(file); err != nil || h != "ironic:$2y$05$x" {
		t.Errorf("mounted: %q, %v", h, err)
	}
	if h, err := readMountedHtpasswd(filepath.Join(dir, "none")); err != nil || h != "" {
		t.Errorf("none: %q, %v", h, err)
	}
	if _, err := readMountedHtpasswd(dir); err == nil {
		t.Error("a directory in its place was taken for no htpasswd")
	}
}

// TestDnsmasqRangeAsMetal3Writes: DHCP_RANGE with a netmask or a lease time, and DNS_IP naming a
// server, as metal3's image takes them; a field that is none of those is an error naming it.
func TestDnsmasqRangeAsMetal3Writes(t *testing.T) {
	ip := netip.MustParseAddr("172.22.0.3")
	for rng, want := range map[string]string{
		"172.22.0.10,172.22.0.100,255.255.255.0":     "dhcp-range=172.22.0.10,172.22.0.100,255.255.255.0\n",
		"172.22.0.10,172.22.0.100,255.255.255.0,12h": "dhcp-range=172.22.0.10,172.22.0.100,255.255.255.0,12h\n",
		"172.22.0.10,172.22.0.100,24,infinite":       "dhcp-range=172.22.0.10,172.22.0.100,255.255.255.0,infinite\n",
	} {
		conf, err := DnsmasqConf(Config{SharedDir: "/shared", DHCPRange: rng, DNS: "10.0.0.53"}, ip, "eth1")
		if err != nil {
			t.Fatalf("%s: %v", rng, err)
		}
		if !strings.Contains(conf, want) || !strings.Contains(conf, "dhcp-option=6,10.0.0.53\n") {
			t.Errorf("%s:\n%s\nwant %q and the DNS server", rng, conf, want)
		}
	}
	if _, err := DnsmasqConf(Config{DHCPRange: "172.22.0.10,172.22.0.100,soon"}, ip, "eth1"); err == nil || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("a bad field: %v", err)
	}
	conf, err := DnsmasqConf(Config{SharedDir: "/shared", DHCPRange: "fd00::a,fd00::ff,64", DNS: "fd00::53"}, netip.MustParseAddr("fd00::3"), "eth1")
	if err != nil || !strings.Contains(conf, "dhcp-option=option6:dns-server,[fd00::53]\n") {
		t.Errorf("IPv6 DNS server: %v\n%s", err, conf)
	}
}
