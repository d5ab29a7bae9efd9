package ignition

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"

	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
)

// secretJSON is a registry auth config whose credentials must reach the image and nothing else.
const secretJSON = `{"auths":{"registry.example:5000":{"auth":"dXNlcjpTM2NyZXQtdG9rZW4="}}}`

// secretMarker is a part of secretJSON no output but the image may contain.
const secretMarker = "dXNlcjpTM2NyZXQtdG9rZW4"

func proxyConfig() AgentConfig {
	cfg := testConfig()
	cfg.HTTPProxy = "http://proxy.example:3128"
	cfg.HTTPSProxy = "http://user:p%40ss@proxy.example:3128"
	cfg.NoProxy = ".cluster.local,192.0.2.2"
	cfg.PullSecret = PullSecret(secretJSON)
	return cfg
}

// serviceSection returns the lines of the unit's [Service] section.
func serviceSection(t *testing.T, unit string) []string {
	t.Helper()
	var out []string
	in := false
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, "[") {
			in = l == "[Service]"
			continue
		}
		if in && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Behind a proxy and with an authenticated registry the agent's image is pulled and run through
// the proxy, and the pull authenticates with the pull secret (OpenShift's ICC: installer#5552).
func TestBuildWithProxyAndPullSecret(t *testing.T) {
	cfg := proxyConfig()
	out, err := Build(cfg, Host{Hostname: "host-0"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := v32.Parse(out)
	if err != nil {
		t.Fatalf("Ignition 3.2 rejects the config: %v", err)
	}
	if auth, ok := files(t, c)[AuthFilePath]; !ok {
		t.Errorf("no %s in the config", AuthFilePath)
	} else {
		if got := decode(t, auth.Contents.Source); got != secretJSON {
			t.Errorf("%s holds %q, want the pull secret's JSON", AuthFilePath, got)
		}
		if auth.Mode == nil || *auth.Mode != 0o600 {
			t.Errorf("%s mode %v, want 0600 (credentials)", AuthFilePath, auth.Mode)
		}
	}

	service := serviceSection(t, *c.Systemd.Units[0].Contents)
	// systemd gives a service's Environment= to every command of it, ExecStartPre (the pull) and
	// ExecStart (the run, which passes it on to the container) alike: they must be in [Service].
	wantEnv := []string{
		`Environment="HTTP_PROXY=http://proxy.example:3128"`,
		`Environment="HTTPS_PROXY=http://user:p%%40ss@proxy.example:3128"`, // % is a systemd specifier
		`Environment="NO_PROXY=.cluster.local,192.0.2.2"`,
	}
	var env []string
	var pull, run string
	for _, l := range service {
		switch {
		case strings.HasPrefix(l, "Environment="):
			env = append(env, l)
		case strings.HasPrefix(l, "ExecStartPre="):
			pull = l
		case strings.HasPrefix(l, "ExecStart="):
			run = l
		}
	}
	if strings.Join(env, "\n") != strings.Join(wantEnv, "\n") {
		t.Errorf("[Service] environment:\n%s\nwant:\n%s", strings.Join(env, "\n"), strings.Join(wantEnv, "\n"))
	}
	if pull != "ExecStartPre=/bin/podman pull --authfile "+AuthFilePath+" "+cfg.AgentImage {
		t.Errorf("pull %q does not authenticate with %s", pull, AuthFilePath)
	}
	if !strings.HasPrefix(run, "ExecStart=/bin/podman run ") || strings.Contains(run, "--http-proxy=false") {
		t.Errorf("run %q: podman must pass the proxy on to the agent", run)
	}
}

// Without a proxy, a pull secret or registries.conf the config is byte for byte the one built
// before they were supported, so a controller upgraded without them keeps every image and its URL;
// the configuration's JSON, which the builder digests, is unchanged too. (Hashes taken when the
// agent configuration gained inspection_callback_url: images built before could not inspect, and
// are built once more.)
func TestBuildUnchangedWithoutProxyOrPullSecret(t *testing.T) {
	hosts := map[string]struct {
		host Host
		want string
	}{
		"without network data": {Host{Hostname: "h"}, "5b819d48723eeb2dfe97d33a24cf558b07c076da7abbe7d48cebbc7a12e1a225"},
		"with a keyfile": {Host{Hostname: "host-0", Keyfiles: []nmstate.Keyfile{{Name: "eno1.nmconnection", Data: []byte("[connection]\nid=eno1\n")}}},
			"cc8e2ec6a6bfe5098a3ba8fab153fe5b1f5153b9864798b3361ad8df6a8a26ec"},
	}
	for name, tc := range hosts {
		t.Run(name, func(t *testing.T) {
			out, err := Build(testConfig(), tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != tc.want {
				t.Errorf("the config changed (sha256 %x):\n%s", sum, out)
			}
		})
	}
	j, err := json.Marshal(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	const before = `{"IronicURLs":["https://192.0.2.2:6385"],"AgentImage":"quay.io/metal3-io/ironic-agent:latest",` +
		`"SSHKey":"ssh-ed25519 AAAAC3Nza test@example","IPOptions":"ip=dhcp6","NTPServers":["ntp1.example.com","192.0.2.123"],` +
		`"CABundle":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="}`
	if string(j) != before {
		t.Errorf("the configuration's JSON changed:\n%s\nwant\n%s", j, before)
	}
}

// The pull secret reaches the image only: printed or encoded, the configuration shows no
// credentials (its JSON still changes with the secret, so a new secret rebuilds the images).
func TestPullSecretNeverPrints(t *testing.T) {
	cfg := proxyConfig()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		for what, v := range map[string]any{"config": cfg, "secret": cfg.PullSecret, "pointer": &cfg} {
			if s := fmt.Sprintf(verb, v); strings.Contains(s, secretMarker) || strings.Contains(s, hex.EncodeToString([]byte(secretJSON))[:20]) {
				t.Errorf("%s of the %s shows the secret: %s", verb, what, s)
			}
		}
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(j), secretMarker) || strings.Contains(string(j), base64.StdEncoding.EncodeToString([]byte(secretJSON))[:20]) {
		t.Errorf("JSON shows the secret: %s", j)
	}
	other := cfg
	other.PullSecret = PullSecret(`{"auths":{}}`)
	j2, _ := json.Marshal(other)
	if string(j) == string(j2) {
		t.Error("the JSON does not change with the secret: a new secret would not rebuild the images")
	}
}

func TestParsePullSecret(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(secretJSON))
	for name, in := range map[string]string{
		"base64 (OpenShift's)": b64 + "\n",
		"JSON":                 " " + secretJSON + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePullSecret(in)
			if err != nil || string(got) != secretJSON {
				t.Errorf("got %q, %v", []byte(got), err)
			}
		})
	}
	if got, err := ParsePullSecret("  \n"); err != nil || got != nil {
		t.Errorf("blank: %q, %v; want no secret", []byte(got), err)
	}
	for name, in := range map[string]string{
		"not base64":      "S3cret-token!",
		"base64 of text":  base64.StdEncoding.EncodeToString([]byte("S3cret-token")),
		"base64 of null":  base64.StdEncoding.EncodeToString([]byte("null")),
		"broken JSON":     `{"auths":S3cret-token`,
		"base64 of array": base64.StdEncoding.EncodeToString([]byte(`["S3cret-token"]`)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePullSecret(in)
			if err == nil || !strings.Contains(err.Error(), "pull secret") {
				t.Fatalf("error %v, want one about the pull secret", err)
			}
			if strings.Contains(err.Error(), "S3cret") || strings.Contains(err.Error(), in) {
				t.Errorf("the error quotes the secret: %v", err)
			}
		})
	}
}

// A proxy value that would break the unit is refused without being quoted (it may hold a
// password).
func TestBuildRefusesControlCharactersInProxy(t *testing.T) {
	cfg := testConfig()
	cfg.HTTPSProxy = "http://user:S3cret@proxy.example:3128\nExecStartPre=/bin/sh"
	_, err := Build(cfg, Host{Hostname: "h"})
	if err == nil || !strings.Contains(err.Error(), "HTTPS_PROXY") {
		t.Fatalf("error %v, want one naming HTTPS_PROXY", err)
	}
	if strings.Contains(err.Error(), "S3cret") {
		t.Errorf("the error quotes the proxy: %v", err)
	}
}
