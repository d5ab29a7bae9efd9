package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"

	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
)

// The override client trusts the CA of the file CA_BUNDLE names; without the file it trusts the
// system's roots only (no error); a path that cannot be read stops the controller.
func TestCABundleTrustedForOverrides(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer srv.Close()
	dir := t.TempDir()
	withCA := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(withCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path      string
		wantErr   string // from reading CA_BUNDLE
		wantFetch string // "" for a successful fetch, else in its error
	}{
		"the server's CA": {withCA, "", ""},
		"no file":         {filepath.Join(dir, "missing.crt"), "", "x509: certificate signed by unknown authority"},
		"a directory":     {dir, "is a directory", ""},
		"CA_BUNDLE unset": {"", "", "x509: certificate signed by unknown authority"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CA_BUNDLE", tc.path)
			bundle, err := caBundle(testr.New(t))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			client, err := imagebuild.OverrideClient(bundle)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			if tc.wantFetch == "" && err != nil || tc.wantFetch != "" && (err == nil || !strings.Contains(err.Error(), tc.wantFetch)) {
				t.Errorf("fetch: %v, want %q", err, tc.wantFetch)
			}
		})
	}
}

// secretJSON is the cluster's registry credentials; secretMarker is a part of them no log line or
// error may show.
const (
	secretJSON   = `{"auths":{"registry.example:5000":{"auth":"dXNlcjpTM2NyZXQtdG9rZW4="}}}`
	secretMarker = "dXNlcjpTM2NyZXQtdG9rZW4"
)

// agentEnv sets the agent's required environment and clears the proxy, pull secret and
// registries.conf variables (the test process may run behind a proxy).
func agentEnv(t *testing.T) {
	t.Helper()
	t.Setenv("IRONIC_BASE_URL", "https://192.0.2.2")
	t.Setenv("IRONIC_AGENT_IMAGE", "registry.example:5000/ironic-agent:latest")
	t.Setenv("CA_BUNDLE", "")
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "IRONIC_AGENT_PULL_SECRET", "REGISTRIES_CONF_PATH"} {
		t.Setenv(v, "")
	}
}

// capture is a logger that keeps every line, to check what reaches the log.
func capture(t *testing.T) (logr.Logger, *strings.Builder) {
	t.Helper()
	var b strings.Builder
	return funcr.New(func(prefix, args string) { b.WriteString(prefix + " " + args + "\n") }, funcr.Options{Verbosity: 10}), &b
}

// The cluster's proxy and pull secret reach the hosts' agent: its image is pulled through the
// proxy with the secret (OpenShift's ICC, installer#5552). The secret comes from
// IRONIC_AGENT_PULL_SECRET or the file OpenShift's operator mounts, base64 of the cluster's
// .dockerconfigjson, and never reaches the log.
func TestAgentConfigProxyAndPullSecret(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(secretJSON))
	dir := t.TempDir()
	mounted := filepath.Join(dir, "pull-secret")
	if err := os.WriteFile(mounted, []byte(b64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		env, file string
	}{
		"IRONIC_AGENT_PULL_SECRET":               {b64, filepath.Join(dir, "missing")},
		"the mounted file":                       {"", mounted},
		"IRONIC_AGENT_PULL_SECRET over the file": {b64, filepath.Join(dir, "pull-secret-other")},
	}
	if err := os.WriteFile(filepath.Join(dir, "pull-secret-other"), []byte(base64.StdEncoding.EncodeToString([]byte(`{"auths":{}}`))), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			agentEnv(t)
			t.Setenv("https_proxy", "http://user:S3cret@proxy.example:3128") // Go's lower-case spelling
			t.Setenv("HTTP_PROXY", "http://proxy.example:3128")
			t.Setenv("NO_PROXY", ".cluster.local,192.0.2.2")
			t.Setenv("IRONIC_AGENT_PULL_SECRET", tc.env)
			log, logged := capture(t)
			cfg, err := agentConfig(log, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HTTPProxy != "http://proxy.example:3128" || cfg.HTTPSProxy != "http://user:S3cret@proxy.example:3128" || cfg.NoProxy != ".cluster.local,192.0.2.2" {
				t.Errorf("proxy %q %q %q", cfg.HTTPProxy, cfg.HTTPSProxy, cfg.NoProxy)
			}
			if string(cfg.PullSecret) != secretJSON {
				t.Errorf("pull secret %q, want the JSON", []byte(cfg.PullSecret))
			}
			if strings.Contains(logged.String(), secretMarker) || strings.Contains(logged.String(), b64[:20]) {
				t.Errorf("the log shows the pull secret:\n%s", logged)
			}
			// What the hosts get: the pull authenticates with the secret, the service has the proxy.
			out, err := ignition.Build(cfg, ignition.Host{Hostname: "host-0"})
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := v32.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			var auth bool
			for _, f := range c.Storage.Files {
				auth = auth || (f.Path == ignition.AuthFilePath && f.Mode != nil && *f.Mode == 0o600)
			}
			unit := *c.Systemd.Units[0].Contents
			if !auth || !strings.Contains(unit, "ExecStartPre=/bin/podman pull --authfile "+ignition.AuthFilePath+" ") ||
				!strings.Contains(unit, `Environment="HTTPS_PROXY=http://user:S3cret@proxy.example:3128"`) ||
				!strings.Contains(unit, `Environment="HTTP_PROXY=http://proxy.example:3128"`) ||
				!strings.Contains(unit, `Environment="NO_PROXY=.cluster.local,192.0.2.2"`) {
				t.Errorf("authfile written: %t; unit:\n%s", auth, unit)
			}
		})
	}
}

// Without the proxy variables and a pull secret the configuration is what it was before they
// were read: its JSON (which the image builder digests) has none of their keys, so existing
// images keep their URLs.
func TestAgentConfigWithoutProxyOrPullSecret(t *testing.T) {
	agentEnv(t)
	cfg, err := agentConfig(testr.New(t), filepath.Join(t.TempDir(), "missing"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"IronicURLs":["https://192.0.2.2:6385"],"AgentImage":"registry.example:5000/ironic-agent:latest","SSHKey":"","IPOptions":"","NTPServers":null,"CABundle":null}`
	if string(j) != want {
		t.Errorf("configuration %s, want %s", j, want)
	}
}

// A pull secret that cannot be read or is not a container auth config stops the controller at
// start (every host would fail to pull its agent), naming where it came from, never its content.
func TestAgentConfigRefusesBadPullSecret(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "pull-secret")
	if err := os.WriteFile(bad, []byte("user:S3cret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct{ env, file, want string }{
		"malformed variable": {"S3cret-token!", filepath.Join(dir, "missing"), "IRONIC_AGENT_PULL_SECRET"},
		"malformed file":     {"", bad, bad},
		"unreadable file":    {"", dir, dir},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			agentEnv(t)
			t.Setenv("IRONIC_AGENT_PULL_SECRET", tc.env)
			log, logged := capture(t)
			_, err := agentConfig(log, tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
			if strings.Contains(err.Error()+logged.String(), "S3cret") {
				t.Errorf("the secret shows: %v\n%s", err, logged)
			}
		})
	}
}
