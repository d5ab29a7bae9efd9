package ignition

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/coreos/ignition/v2/config/v3_2/types"

	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
)

// SpecVersion is the Ignition spec Build emits.
const SpecVersion = "3.2.0"

// Paths in the agent image, as the image-customization-controller writes them.
const (
	AgentConfigPath  = "/etc/ironic-python-agent.conf"
	CABundlePath     = "/etc/pki/ca-trust/source/anchors/ca.crt"
	ChronyConfigPath = "/etc/chrony.conf"
	ClientIDPath     = "/etc/NetworkManager/conf.d/clientid.conf"
	AgentUnit        = "ironic-agent.service"
)

// defaultIronicPort is added to an IRONIC_BASE_URL entry without a port (Ironic's API port).
const defaultIronicPort = "6385"

// AgentConfig is what every host's agent image shares: the image-customization-controller's
// environment (IRONIC_BASE_URL, IRONIC_AGENT_IMAGE, IRONIC_RAMDISK_SSH_KEY, IP_OPTIONS,
// ADDITIONAL_NTP_SERVERS and the content of CA_BUNDLE).
type AgentConfig struct {
	// IronicURLs are the Ironic API endpoints the agent tries (api_url), with the port.
	IronicURLs []string
	// AgentImage is the ironic-python-agent container image the live system runs.
	AgentImage string
	// SSHKey is authorized for the core user (for debugging a host's agent).
	SSHKey string
	// IPOptions are the ip= kernel arguments the agent gives the installed system
	// (IPA_COREOS_IP_OPTIONS), e.g. ip=dhcp6.
	IPOptions string
	// NTPServers are appended to chrony's configuration.
	NTPServers []string
	// CABundle (PEM) is trusted by the live system.
	CABundle []byte
}

// ParseIronicURLs reads IRONIC_BASE_URL: comma-separated http(s) URLs; Ironic's port is added to
// one without a port.
func ParseIronicURLs(s string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("IRONIC_BASE_URL: %q is not an http or https URL", raw)
		}
		if u.Port() == "" {
			u.Host = net.JoinHostPort(u.Hostname(), defaultIronicPort)
		}
		out = append(out, strings.TrimSuffix(u.String(), "/"))
	}
	if len(out) == 0 {
		return nil, errors.New("IRONIC_BASE_URL is empty")
	}
	return out, nil
}

// Host is what one host's image adds: its name and network configuration.
type Host struct {
	// Hostname is the agent's default hostname (the PreprovisioningImage's name).
	Hostname string
	// Keyfiles are the host's NetworkManager profiles (none: the agent uses DHCP).
	Keyfiles []nmstate.Keyfile
}

// Build returns the host's Ignition config (spec 3.2.0, JSON). The same input gives the same
// bytes, and the result is checked with Ignition's own validation.
func Build(cfg AgentConfig, host Host) ([]byte, error) {
	if len(cfg.IronicURLs) == 0 {
		return nil, errors.New("no Ironic URL")
	}
	if cfg.AgentImage == "" {
		return nil, errors.New("no agent image")
	}
	c := types.Config{Ignition: types.Ignition{Version: SpecVersion}}
	files := []types.File{
		file(AgentConfigPath, 0o644, agentConf(cfg, host)),
		file(ClientIDPath, 0o644, "[connection]\nipv6.dhcp-duid=ll\nipv6.dhcp-iaid=mac\n"),
	}
	keyfiles := append([]nmstate.Keyfile(nil), host.Keyfiles...)
	sort.Slice(keyfiles, func(i, j int) bool { return keyfiles[i].Name < keyfiles[j].Name })
	for _, k := range keyfiles {
		files = append(files, file(nmstate.KeyfileDir+"/"+k.Name, 0o600, string(k.Data)))
	}
	if len(cfg.CABundle) > 0 {
		files = append(files, file(CABundlePath, 0o644, string(cfg.CABundle)))
	}
	if len(cfg.NTPServers) > 0 {
		var b strings.Builder
		for _, s := range cfg.NTPServers {
			fmt.Fprintf(&b, "server %s iburst\n", s)
		}
		files = append(files, types.File{
			Node:          types.Node{Path: ChronyConfigPath},
			FileEmbedded1: types.FileEmbedded1{Append: []types.Resource{{Source: dataURL(b.String())}}},
		})
	}
	c.Storage.Files = files
	if cfg.SSHKey != "" {
		c.Passwd.Users = []types.PasswdUser{{Name: "core", SSHAuthorizedKeys: []types.SSHAuthorizedKey{types.SSHAuthorizedKey(cfg.SSHKey)}}}
	}
	unit := agentUnit(cfg, host)
	c.Systemd.Units = []types.Unit{{Name: AgentUnit, Enabled: boolPtr(true), Contents: &unit}}
	out, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding the Ignition config: %w", err)
	}
	if _, rpt, err := v32.Parse(out); err != nil {
		return nil, fmt.Errorf("the Ignition config is not valid: %w: %s", err, rpt.String())
	}
	return out, nil
}

// agentConf is ironic-python-agent's configuration file. Without network data the agent brings
// up VLAN interfaces it learns of by LLDP; with it, the network is what the data says.
func agentConf(cfg AgentConfig, host Host) string {
	vlans := "all"
	if len(host.Keyfiles) > 0 {
		vlans = ""
	}
	return fmt.Sprintf("[DEFAULT]\napi_url = %s\ninsecure = True\nenable_vlan_interfaces = %s\n", strings.Join(cfg.IronicURLs, ","), vlans)
}

// agentUnit runs the agent container on the live system. IPA_COREOS_COPY_NETWORK makes the agent
// copy the live system's NetworkManager profiles into the installed one.
func agentUnit(cfg AgentConfig, host Host) string {
	env := []string{
		"IPA_COREOS_IP_OPTIONS=" + cfg.IPOptions,
		fmt.Sprintf("IPA_COREOS_COPY_NETWORK=%t", len(host.Keyfiles) > 0),
		"IPA_DEFAULT_HOSTNAME=" + host.Hostname,
	}
	var run strings.Builder
	run.WriteString("/bin/podman run --rm --privileged --network host --name ironic-agent")
	for _, m := range []string{"/dev:/dev", "/sys:/sys", "/run/dbus/system_bus_socket:/run/dbus/system_bus_socket", "/:/mnt/coreos",
		AgentConfigPath + ":/etc/ironic-python-agent/ignition.conf:ro"} {
		run.WriteString(" --volume " + m)
	}
	for _, e := range env {
		fmt.Fprintf(&run, " --env %q", e)
	}
	run.WriteString(" " + cfg.AgentImage)
	return fmt.Sprintf(`[Unit]
Description=Ironic agent
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
TimeoutStartSec=0
Restart=on-failure
RestartSec=5
ExecStartPre=/bin/podman pull %s
ExecStart=%s

[Install]
WantedBy=multi-user.target
`, cfg.AgentImage, run.String())
}

func file(path string, mode int, content string) types.File {
	return types.File{
		Node:          types.Node{Path: path, Overwrite: boolPtr(true)},
		FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: types.Resource{Source: dataURL(content)}},
	}
}

// dataURL is RFC 2397 with base64, which every Ignition version reads.
func dataURL(s string) *string {
	u := "data:;base64," + base64.StdEncoding.EncodeToString([]byte(s))
	return &u
}

func boolPtr(b bool) *bool { return &b }
