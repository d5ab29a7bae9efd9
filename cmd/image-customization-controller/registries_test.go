package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"

	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
)

// The registries.conf REGISTRIES_CONF_PATH names (OpenShift's operator mounts the node's, with a
// disconnected cluster's mirrors) reaches every host's image; unset, naming no file (logged) or
// empty, the images keep the live system's own; a path that cannot be read stops the controller
// at start, naming the variable.
func TestAgentConfigRegistriesConf(t *testing.T) {
	const conf = "[[registry]]\nlocation = \"quay.io/metal3-io\"\n[[registry.mirror]]\nlocation = \"mirror.example:5000/metal3-io\"\n"
	dir := t.TempDir()
	file, empty := filepath.Join(dir, "registries.conf"), filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path    string
		want    string // the image's registries.conf, "" for none
		logged  string // in the log
		wantErr string
	}{
		"the cluster's file": {path: file, want: conf, logged: "cluster's registries.conf"},
		"unset":              {path: ""},
		"no file":            {path: filepath.Join(dir, "missing.conf"), logged: "REGISTRIES_CONF_PATH names no file"},
		"an empty file":      {path: empty},
		"a directory":        {path: dir, wantErr: "REGISTRIES_CONF_PATH"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			agentEnv(t)
			t.Setenv("REGISTRIES_CONF_PATH", tc.path)
			log, logged := capture(t)
			cfg, err := agentConfig(log, filepath.Join(dir, "no-pull-secret"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(cfg.RegistriesConf) != tc.want {
				t.Errorf("registries.conf %q, want %q", cfg.RegistriesConf, tc.want)
			}
			if !strings.Contains(logged.String(), tc.logged) {
				t.Errorf("the log lacks %q:\n%s", tc.logged, logged)
			}
			// What the hosts get.
			out, err := ignition.Build(cfg, ignition.Host{Hostname: "host-0"})
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := v32.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			var written bool
			for _, f := range c.Storage.Files {
				written = written || f.Path == ignition.RegistriesConfPath
			}
			if written != (tc.want != "") {
				t.Errorf("%s in the image: %t, want %t", ignition.RegistriesConfPath, written, tc.want != "")
			}
		})
	}
}
