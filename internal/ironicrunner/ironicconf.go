package ironicrunner

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// PeriodicMaxWorkers is Ironic's [conductor] periodic_max_workers. Besides capping the workers of
// each periodic task, it is how many nodes per state a starting conductor moves out of a working
// state a killed conductor left them in (Ironic 39's _correct_stuck_states stops there). With the
// default 8, a restart in the middle of a rack's cleaning left most nodes in "cleaning" or
// "deleting" for good. The conductor refuses to start unless sync_power_state_workers (8) + 2 x
// this + 2 is less than its pool (300 less 5 % reserved).
const PeriodicMaxWorkers = 128

// Paths derived from the configuration.
func (c Config) confPath() string     { return filepath.Join(c.ConfDir, "ironic.conf") }
func (c Config) htpasswdPath() string { return filepath.Join(c.ConfDir, "htpasswd") }
func (c Config) databasePath() string { return filepath.Join(c.DataDir, "ironic.sqlite") }
func (c Config) httpRoot() string     { return filepath.Join(c.SharedDir, "html") }

// apiURL is Ironic's API as the agent reaches it.
func (c Config) apiURL(ip netip.Addr, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s:%d", scheme, urlHost(ip), c.APIPort)
}

// IronicConf is the ironic.conf for ip (Ironic's address): one process with no message bus, sqlite,
// the hardware types the baremetal-operator maps BMC addresses to, images served from the shared
// html directory, and TLS and basic authentication when configured. Options not set here take
// Ironic's defaults; oslo.config also reads OS_<SECTION>__<OPTION> variables, as metal3's image
// documents.
func IronicConf(c Config, ip netip.Addr, tls bool) string {
	var b strings.Builder
	section := func(name string, kv ...string) {
		fmt.Fprintf(&b, "[%s]\n", name)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				fmt.Fprintf(&b, "%s = %s\n", kv[i], kv[i+1])
			}
		}
		b.WriteString("\n")
	}
	auth, userFile := "noauth", ""
	if c.Htpasswd != "" {
		auth, userFile = "http_basic", c.htpasswdPath()
	}
	section("DEFAULT",
		"auth_strategy", auth,
		"http_basic_auth_user_file", userFile,
		"use_stderr", "true",
		"rpc_transport", "none",
		"enabled_hardware_types", "ipmi,idrac,redfish",
		"enabled_boot_interfaces", "ipxe,pxe,redfish-virtual-media,redfish-https,idrac-redfish-virtual-media",
		"enabled_power_interfaces", "ipmitool,redfish,idrac-redfish",
		"enabled_management_interfaces", "ipmitool,redfish,idrac-redfish",
		"enabled_inspect_interfaces", "agent,redfish,idrac-redfish,no-inspect",
		"default_inspect_interface", "agent",
		"enabled_deploy_interfaces", "direct,ramdisk,custom-agent",
		"default_deploy_interface", "direct",
		"enabled_bios_interfaces", "no-bios,redfish,idrac-redfish",
		"enabled_firmware_interfaces", "no-firmware,redfish",
		"enabled_raid_interfaces", "no-raid,agent,redfish,idrac-redfish",
		"enabled_vendor_interfaces", "no-vendor,ipmitool,redfish,idrac-redfish",
		"enabled_network_interfaces", "noop",
		"default_network_interface", "noop",
		"tempdir", filepath.Join(c.DataDir, "tmp"),
		"esp_image", c.ESPImage,
		// The conductor's own downloads (an https image or checksum URL it checks before a
		// deployment) verify the server's certificate against this CA file; IRONIC_INSECURE, as
		// metal3's image, verifies none (Ironic's default True refused an image server with a
		// private CA although the agent, with ipa-insecure, would have taken it).
		"webserver_verify_ca", c.webserverVerifyCA(),
	)
	api := []string{"host_ip", c.listenAddress(ip), "port", fmt.Sprint(c.APIPort)}
	if tls {
		api = append(api, "enable_ssl_api", "true", "cert_file", c.CertFile, "key_file", c.KeyFile)
	}
	section("api", api...)
	section("database", "connection", "sqlite:///"+c.databasePath(),
		// A rack working at once makes writers wait on sqlite's lock longer than the default 10 s.
		"sqlite_max_wait_for_retry", "60")
	section("conductor", "automated_clean", "true",
		// metal3's image's values: an agent may take long to boot on real servers (firmware,
		// many disks), and some BMCs take over a minute to change power.
		"deploy_callback_timeout", "4800",
		"power_state_change_timeout", "120",
		// A restarted conductor fails the nodes a dead one left in a working state, but at most
		// periodic_max_workers (default 8) per state; the rest stay there for good. 128 is the most
		// the default worker pool starts with (docs/ironic-notes.md, "A restart fails 8 nodes").
		"periodic_max_workers", strconv.Itoa(PeriodicMaxWorkers),
		// file:// agent images live on the shared volume (the machine OS images init container).
		"file_url_allowed_paths", strings.Join([]string{c.DataDir, c.SharedDir, "/templates"}, ","))
	deploy := []string{
		"fast_track", fmt.Sprint(c.FastTrack),
		"http_url", fmt.Sprintf("http://%s:%d", urlHost(ip), c.HTTPPort),
		"http_root", c.httpRoot(),
		"default_boot_mode", "uefi",
		// Automated cleaning (automatedCleaningMode: metadata) wipes partition tables and
		// metadata only, as metal3's image configures it. Left to the agent's priorities,
		// erase_devices also ran: a secure erase or shred of every disk, hours per disk, which
		// some controllers refuse (clean failed).
		"erase_devices_metadata_priority", "10",
		"erase_devices_priority", "0",
	}
	external := ip
	if c.ExternalIP.IsValid() {
		external = c.ExternalIP
		deploy = append(deploy, "external_callback_url", c.apiURL(c.ExternalIP, tls))
	}
	switch {
	case tls && c.VMediaTLSPort != 0:
		deploy = append(deploy, "external_http_url", fmt.Sprintf("https://%s:%d", urlHost(external), c.VMediaTLSPort))
	case c.ExternalIP.IsValid():
		deploy = append(deploy, "external_http_url", fmt.Sprintf("http://%s:%d", urlHost(external), c.HTTPPort))
	}
	section("deploy", deploy...)
	kernel := strings.TrimSpace("nofb vga=normal " + c.KernelParams)
	if c.KernelIPFromAddresses {
		kernel += " " + AgentIPOptions(ip, c.ExternalIP)
	}
	if c.Insecure {
		kernel += " ipa-insecure=1"
	}
	section("redfish", "kernel_append_params", kernel)
	section("pxe", "kernel_append_params", kernel,
		"images_path", filepath.Join(c.SharedDir, "html", "tmp"),
		"instance_master_path", filepath.Join(c.SharedDir, "html", "master_images"),
		"tftp_root", filepath.Join(c.SharedDir, "tftpboot"),
		"tftp_master_path", filepath.Join(c.SharedDir, "tftpboot", "master_images"),
		// A PXE boot that got lost is retried after 20 minutes (metal3's image), not left to the
		// callback timeout.
		"boot_retry_timeout", "1200")
	section("agent", "deploy_logs_local_path", filepath.Join(c.SharedDir, "log", "ironic", "deploy"),
		// metal3's image: a moment of network trouble between the conductor and the agent fails
		// the step after Ironic's 3 attempts.
		"max_command_attempts", "30")
	section("service_catalog", "endpoint_override", c.apiURL(ip, tls))
	section("dhcp", "dhcp_provider", "none")
	section("oslo_concurrency", "lock_path", filepath.Join(c.DataDir, "lock"))
	return b.String()
}

// AgentIPOptions is the agent's ip= kernel option for the families of the addresses it reaches
// Ironic on (invalid ones ignored): DHCPv4, DHCPv6, or both ("dhcp,dhcp6": dracut and
// NetworkManager's initrd generator try both, either is enough); DHCPv4 when none is known. An
// IPv6-only host asked for DHCPv4 alone never gets an address. The cluster-baremetal-operator
// renders the same rule where it knows the addresses.
func AgentIPOptions(addrs ...netip.Addr) string {
	var v4, v6 bool
	for _, a := range addrs {
		switch {
		case !a.IsValid():
		case a.Unmap().Is4():
			v4 = true
		default:
			v6 = true
		}
	}
	switch {
	case v4 && v6:
		return "ip=dhcp,dhcp6"
	case v6:
		return "ip=dhcp6"
	}
	return "ip=dhcp"
}

// webserverVerifyCA is [DEFAULT] webserver_verify_ca: the CA file WEBSERVER_CACERT_FILE names,
// else False with IRONIC_INSECURE, else unset (Ironic's default: the system's CAs).
func (c Config) webserverVerifyCA() string {
	switch {
	case c.WebserverCACert != "":
		return c.WebserverCACert
	case c.Insecure:
		return "False"
	}
	return ""
}
