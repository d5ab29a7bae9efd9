package ignition

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os/exec"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/coreos/ignition/v2/config/v3_2/types"
	v34 "github.com/coreos/ignition/v2/config/v3_4"

	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
)

func testConfig() AgentConfig {
	return AgentConfig{
		IronicURLs: []string{"https://192.0.2.2:6385"},
		AgentImage: "quay.io/metal3-io/ironic-agent:latest",
		SSHKey:     "ssh-ed25519 AAAAC3Nza test@example",
		IPOptions:  "ip=dhcp6",
		NTPServers: []string{"ntp1.example.com", "192.0.2.123"},
		CABundle:   []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	}
}

func decode(t *testing.T, src *string) string {
	t.Helper()
	data, ok := strings.CutPrefix(*src, "data:;base64,")
	if !ok {
		t.Fatalf("source %q is not a base64 data URL", *src)
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func files(t *testing.T, c types.Config) map[string]types.File {
	t.Helper()
	m := map[string]types.File{}
	for _, f := range c.Storage.Files {
		m[f.Path] = f
	}
	return m
}

func TestBuild(t *testing.T) {
	host := Host{Hostname: "host-0", Keyfiles: []nmstate.Keyfile{
		{Name: "eno2.nmconnection", Data: []byte("[connection]\nid=eno2\n")},
		{Name: "eno1.nmconnection", Data: []byte("[connection]\nid=eno1\n")},
	}}
	out, err := Build(testConfig(), host)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := v32.Parse(out)
	if err != nil {
		t.Fatalf("Ignition 3.2 rejects the config: %v", err)
	}
	if c.Ignition.Version != "3.2.0" {
		t.Errorf("version %s", c.Ignition.Version)
	}
	fs := files(t, c)
	conf := decode(t, fs[AgentConfigPath].Contents.Source)
	for _, want := range []string{"api_url = https://192.0.2.2:6385\n", "inspection_callback_url = https://192.0.2.2:6385/v1/continue_inspection\n",
		"insecure = True\n", "enable_vlan_interfaces = \n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("agent config lacks %q:\n%s", want, conf)
		}
	}
	for _, n := range []string{"eno1", "eno2"} {
		f, ok := fs["/etc/NetworkManager/system-connections/"+n+".nmconnection"]
		if !ok || *f.Mode != 0o600 || decode(t, f.Contents.Source) != "[connection]\nid="+n+"\n" {
			t.Errorf("keyfile %s: %+v", n, f)
		}
	}
	if decode(t, fs[CABundlePath].Contents.Source) != string(testConfig().CABundle) {
		t.Error("CA bundle not written")
	}
	chrony := fs[ChronyConfigPath]
	if len(chrony.Append) != 1 || decode(t, chrony.Append[0].Source) != "server ntp1.example.com iburst\nserver 192.0.2.123 iburst\n" || chrony.Contents.Source != nil {
		t.Errorf("chrony must be appended to, not replaced: %+v", chrony)
	}
	if len(c.Passwd.Users) != 1 || c.Passwd.Users[0].Name != "core" || string(c.Passwd.Users[0].SSHAuthorizedKeys[0]) != testConfig().SSHKey {
		t.Errorf("users %+v", c.Passwd.Users)
	}
	u := c.Systemd.Units[0]
	if u.Name != AgentUnit || !*u.Enabled {
		t.Fatalf("unit %+v", u)
	}
	for _, want := range []string{"quay.io/metal3-io/ironic-agent:latest", `"IPA_COREOS_IP_OPTIONS=ip=dhcp6"`, `"IPA_COREOS_COPY_NETWORK=true"`, `"IPA_DEFAULT_HOSTNAME=host-0"`} {
		if !strings.Contains(*u.Contents, want) {
			t.Errorf("unit lacks %s:\n%s", want, *u.Contents)
		}
	}
	// Keyfile order does not change the bytes (stable URLs).
	host.Keyfiles[0], host.Keyfiles[1] = host.Keyfiles[1], host.Keyfiles[0]
	again, err := Build(testConfig(), host)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("the same input gave different bytes (%v)", err)
	}
}

func TestBuildWithoutNetworkData(t *testing.T) {
	cfg := testConfig()
	cfg.SSHKey, cfg.NTPServers, cfg.CABundle = "", nil, nil
	out, err := Build(cfg, Host{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := v32.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, c)
	if _, ok := fs[CABundlePath]; ok || len(c.Passwd.Users) != 0 || len(fs) != 2 {
		t.Errorf("unexpected content: files %v, users %v", fs, c.Passwd.Users)
	}
	if !strings.Contains(decode(t, fs[AgentConfigPath].Contents.Source), "enable_vlan_interfaces = all") {
		t.Error("without network data the agent should bring up LLDP VLANs")
	}
	if !strings.Contains(*c.Systemd.Units[0].Contents, `"IPA_COREOS_COPY_NETWORK=false"`) {
		t.Error("nothing to copy without keyfiles")
	}
}

func TestParseIronicURLs(t *testing.T) {
	got, err := ParseIronicURLs("https://192.0.2.2, http://[2001:db8::2]:6388/ ,")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "https://192.0.2.2:6385 http://[2001:db8::2]:6388" {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", " , ", "192.0.2.2:6385", "ftp://x"} {
		if _, err := ParseIronicURLs(bad); err == nil || !strings.Contains(err.Error(), "IRONIC_BASE_URL") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

func TestMerge(t *testing.T) {
	base, err := Build(testConfig(), Host{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		override    string
		wantVersion string
	}{
		// An older spec is translated up to ours.
		"3.1 override": {`{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/assisted/agent.conf","contents":{"source":"data:,hello"}}]}}`, "3.2.0"},
		// A newer one is kept, and our config is translated up to it.
		"3.4 override": {`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/assisted/agent.conf","contents":{"source":"data:,hello"}}]}}`, "3.4.0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := Merge(base, []byte(tc.override))
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := v34.ParseCompatibleVersion(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), `"version":"`+tc.wantVersion+`"`) {
				t.Errorf("merged config is not spec %s: %.80s", tc.wantVersion, out)
			}
			paths := map[string]bool{}
			for _, f := range c.Storage.Files {
				paths[f.Path] = true
			}
			if !paths["/etc/assisted/agent.conf"] || !paths[AgentConfigPath] {
				t.Errorf("merged files %v lack the override's or ours", paths)
			}
			if len(c.Systemd.Units) != 1 {
				t.Errorf("units %v", c.Systemd.Units)
			}
		})
	}
}

// The override wins where both set the same file (Ignition's merge rule).
func TestMergeOverrideWins(t *testing.T) {
	base, err := Build(testConfig(), Host{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Merge(base, []byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"`+AgentConfigPath+`","overwrite":true,"contents":{"source":"data:,replaced"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := v32.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if src := files(t, c)[AgentConfigPath].Contents.Source; src == nil || *src != "data:,replaced" {
		t.Errorf("source %v", src)
	}
}

func TestMergeRefusesBadOverrides(t *testing.T) {
	base, err := Build(testConfig(), Host{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]string{
		"not json":     "hello",
		"spec 2":       `{"ignition":{"version":"2.2.0"}}`,
		"experimental": `{"ignition":{"version":"3.6.0-experimental"}}`,
		"invalid":      `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"relative/path"}]}}`,
		"empty":        ``,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Merge(base, []byte(o)); !errors.Is(err, ErrInvalidOverride) {
				t.Errorf("error %v, want ErrInvalidOverride", err)
			}
		})
	}
}

// The archive is read back by Debian's gzip and cpio, independent of the writer.
func TestArchiveReadByCPIO(t *testing.T) {
	cfg := []byte(`{"ignition":{"version":"3.2.0"}}`)
	a, err := Archive(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Archive(cfg)
	if !bytes.Equal(a, b) {
		t.Error("Archive is not deterministic")
	}
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio is not installed; `make test` installs it (hack/host-packages.sh)")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "gzip -dc | cpio -idv --quiet 2>&1 && cat config.ign")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(a)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gzip | cpio: %v\n%s", err, out)
	}
	if string(out) != "config.ign\n"+string(cfg) {
		t.Errorf("cpio listed and extracted:\n%s", out)
	}
}
