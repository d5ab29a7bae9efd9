package ignition

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"unicode"

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
	// AuthFilePath is the pull secret podman pulls the agent image with (OpenShift's path).
	AuthFilePath = "/etc/authfile.json"
	// RegistriesConfPath is the containers' registries configuration podman pulls the agent image
	// with: a disconnected cluster's mirrors are in it.
	RegistriesConfPath = "/etc/containers/registries.conf"
)

// defaultIronicPort is added to an IRONIC_BASE_URL entry without a port (Ironic's API port).
const defaultIronicPort = "6385"

// AgentConfig is what every host's agent image shares: the image-customization-controller's
// environment (IRONIC_BASE_URL, IRONIC_AGENT_IMAGE, IRONIC_RAMDISK_SSH_KEY, IP_OPTIONS,
// ADDITIONAL_NTP_SERVERS, the content of CA_BUNDLE, HTTP_PROXY, HTTPS_PROXY, NO_PROXY,
// IRONIC_AGENT_PULL_SECRET and the content of REGISTRIES_CONF_PATH).
//
// The fields added after the first release are omitted from JSON when empty: the builder digests
// the configuration as JSON, and a controller upgraded without them must keep its images' URLs.
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
	// HTTPProxy, HTTPSProxy and NoProxy are the cluster's proxy: podman pulls the agent image
	// through it and hands it to the agent's container. Without them a host behind a proxy never
	// gets its agent, so never reaches Ironic.
	HTTPProxy  string `json:",omitempty"`
	HTTPSProxy string `json:",omitempty"`
	NoProxy    string `json:",omitempty"`
	// PullSecret authenticates podman's pull of AgentImage (a registry that asks for credentials).
	PullSecret PullSecret `json:",omitempty"`
	// RegistriesConf replaces the live system's containers registries.conf (the cluster's, with
	// the mirrors of a disconnected cluster): without it podman pulls the agent image from the
	// registry its name says, which such a cluster cannot reach. Empty: the live image's own.
	RegistriesConf []byte `json:",omitempty"`
}

// PullSecret is a registry credentials file: a container auth config's JSON ({"auths": …}). It
// never prints (fmt and loggers see "<redacted>"), and its JSON is its digest, which is all the
// builder's configuration digest needs: a new secret still rebuilds every image.
type PullSecret []byte

const redacted = "<redacted>"

// String redacts the secret.
func (PullSecret) String() string { return redacted }

// GoString redacts the secret for %#v.
func (PullSecret) GoString() string { return redacted }

// Format redacts the secret for every verb (%x or %d on a byte slice would print it otherwise).
func (PullSecret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON is the secret's SHA-256.
func (s PullSecret) MarshalJSON() ([]byte, error) {
	sum := sha256.Sum256(s)
	return json.Marshal("sha256:" + hex.EncodeToString(sum[:]))
}

// ParsePullSecret reads IRONIC_AGENT_PULL_SECRET as OpenShift's cluster-baremetal-operator
// writes it (base64 of the cluster's .dockerconfigjson), or that JSON itself; surrounding space
// is ignored and "" is no secret. Errors never quote the value.
func ParsePullSecret(s string) (PullSecret, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	data := []byte(s)
	if !strings.HasPrefix(s, "{") {
		var err error
		if data, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, errors.New("the pull secret is neither base64 nor JSON")
		}
	}
	var auth map[string]json.RawMessage
	if json.Unmarshal(data, &auth) != nil || auth == nil {
		return nil, errors.New("the pull secret is not a container auth config (a JSON object, as .dockerconfigjson)")
	}
	return data, nil
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
	if err := cfg.Check(); err != nil {
		return nil, err
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
	if len(cfg.PullSecret) > 0 {
		// Root's podman reads it; nobody else on the live system needs the credentials.
		files = append(files, file(AuthFilePath, 0o600, string(cfg.PullSecret)))
	}
	if len(cfg.RegistriesConf) > 0 {
		// No credentials in it (they are the pull secret's): world-readable, as the live image's
		// own file and OpenShift's.
		files = append(files, file(RegistriesConfPath, 0o644, string(cfg.RegistriesConf)))
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

// Check reports a configuration no image can be built with. It quotes no proxy value: a proxy
// URL may carry credentials.
func (cfg AgentConfig) Check() error {
	if len(cfg.IronicURLs) == 0 {
		return errors.New("no Ironic URL")
	}
	if cfg.AgentImage == "" {
		return errors.New("no agent image")
	}
	for _, v := range proxyVars(cfg) {
		if strings.ContainsFunc(v.value, unicode.IsControl) {
			return fmt.Errorf("%s holds a control character, which the agent's systemd unit cannot carry", v.name)
		}
	}
	return nil
}

type envVar struct{ name, value string }

func proxyVars(cfg AgentConfig) []envVar {
	return []envVar{{"HTTP_PROXY", cfg.HTTPProxy}, {"HTTPS_PROXY", cfg.HTTPSProxy}, {"NO_PROXY", cfg.NoProxy}}
}

// agentConf is ironic-python-agent's configuration file. Without network data the agent brings
// up VLAN interfaces it learns of by LLDP; with it, the network is what the data says. The
// inspection callback is Ironic's own (Ironic 39 inspects without ironic-inspector): the agent
// inspects only when it has one, and Ironic cannot pass it on the kernel command line of an image
// it did not build, so without it a host booted from this image waited in inspect wait until
// Ironic's timeout (OpenShift's image-customization-controller writes it too).
func agentConf(cfg AgentConfig, host Host) string {
	vlans := "all"
	if len(host.Keyfiles) > 0 {
		vlans = ""
	}
	callback := ""
	if len(cfg.IronicURLs) > 0 {
		callback = strings.TrimSuffix(cfg.IronicURLs[0], "/") + "/v1/continue_inspection"
	}
	return fmt.Sprintf("[DEFAULT]\napi_url = %s\ninspection_callback_url = %s\ninsecure = True\nenable_vlan_interfaces = %s\n",
		strings.Join(cfg.IronicURLs, ","), callback, vlans)
}

// agentUnit runs the agent container on the live system. IPA_COREOS_COPY_NETWORK makes the agent
// copy the live system's NetworkManager profiles into the installed one. Without a proxy or a
// pull secret the unit is byte for byte what it was before they were supported.
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
	pull := "/bin/podman pull"
	if len(cfg.PullSecret) > 0 {
		// Only the pull needs it: the run finds the image pulled.
		pull += " --authfile " + AuthFilePath
	}
	return fmt.Sprintf(`[Unit]
Description=Ironic agent
After=network-online.target
Wants=network-online.target

[Service]
%sType=simple
TimeoutStartSec=0
Restart=on-failure
RestartSec=5
ExecStartPre=%s %s
ExecStart=%s

[Install]
WantedBy=multi-user.target
`, proxyEnvironment(cfg), pull, cfg.AgentImage, run.String())
}

// proxyEnvironment is the service's Environment= lines for the proxy variables that are set.
// systemd gives them to every command of the service: podman pulls the agent image through the
// proxy, and podman run passes them on to the agent's container (its --http-proxy, on by
// default), so the agent's own downloads go the same way (OpenShift's unit does the same).
func proxyEnvironment(cfg AgentConfig) string {
	var b strings.Builder
	for _, v := range proxyVars(cfg) {
		if v.value != "" {
			fmt.Fprintf(&b, "Environment=%s\n", systemdQuote(v.name+"="+v.value))
		}
	}
	return b.String()
}

// systemdQuote makes s one double-quoted word of a unit file: systemd unescapes backslashes and
// quotes in it and expands % specifiers (a percent-encoded proxy password has % in it).
func systemdQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s) + `"`
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
