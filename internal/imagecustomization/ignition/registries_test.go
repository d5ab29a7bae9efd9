package ignition

import (
	"bytes"
	"encoding/json"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
)

// registriesConf mirrors the agent image's registry, as a disconnected cluster's file does.
const registriesConf = `unqualified-search-registries = ["registry.access.redhat.com"]

[[registry]]
  location = "quay.io/metal3-io"
  mirror-by-digest-only = false

  [[registry.mirror]]
    location = "mirror.example:5000/metal3-io"
`

// A disconnected cluster's registries.conf reaches the live system, where podman pulls the agent
// image through its mirrors (OpenShift's ICC writes it the same way: mode 0644, overwriting the
// live image's own).
func TestBuildWithRegistriesConf(t *testing.T) {
	cfg := testConfig()
	cfg.RegistriesConf = []byte(registriesConf)
	out, err := Build(cfg, Host{Hostname: "host-0"})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := v32.Parse(out)
	if err != nil {
		t.Fatalf("Ignition 3.2 rejects the config: %v", err)
	}
	f, ok := files(t, c)[RegistriesConfPath]
	if !ok {
		t.Fatalf("no %s in the config", RegistriesConfPath)
	}
	if got := decode(t, f.Contents.Source); got != registriesConf {
		t.Errorf("%s holds %q, want the cluster's file", RegistriesConfPath, got)
	}
	if f.Mode == nil || *f.Mode != 0o644 {
		t.Errorf("%s mode %v, want 0644", RegistriesConfPath, f.Mode)
	}
	if f.Overwrite == nil || !*f.Overwrite {
		t.Errorf("%s does not overwrite the live image's own file", RegistriesConfPath)
	}
	// The builder digests the configuration's JSON: a new file must rebuild the images.
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.RegistriesConf = []byte(registriesConf + "# changed\n")
	j2, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(j, j2) {
		t.Error("the configuration's JSON does not change with registries.conf: a new file would not rebuild the images")
	}
}

// Without registries.conf, or with an empty one (OpenShift's operator mounts the node's file with
// FileOrCreate, so a node without one gives an empty file), the config and the configuration's JSON
// are those of before registries.conf was supported: existing images keep their URLs.
// TestBuildUnchangedWithoutProxyOrPullSecret holds the hashes taken then.
func TestBuildUnchangedWithoutRegistriesConf(t *testing.T) {
	want, err := Build(testConfig(), Host{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.RegistriesConf = []byte{}
	got, err := Build(cfg, Host{Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("an empty registries.conf changed the config:\n%s", got)
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(j, wantJSON) {
		t.Errorf("an empty registries.conf changed the configuration's JSON:\n%s\nwant\n%s", j, wantJSON)
	}
}
