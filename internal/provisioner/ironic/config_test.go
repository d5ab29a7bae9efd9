package ironic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	authDir := func(t *testing.T, files map[string]string) string {
		t.Helper()
		root := t.TempDir()
		if files != nil {
			dir := filepath.Join(root, "ironic")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		return root
	}
	tests := map[string]struct {
		env     map[string]string
		auth    map[string]string // files under <root>/ironic; nil: no directory
		check   func(t *testing.T, c Config)
		wantErr []string // substrings of the error; nil: no error
		builder bool     // --build-preprov-image
	}{
		"defaults": {
			env: map[string]string{EnvEndpoint: "http://127.0.0.1:6385/v1/"},
			check: func(t *testing.T, c Config) {
				t.Helper()
				if c.ProvisioningLimit != 20 || c.ClientTimeout != 30*time.Second || c.Username != "" || c.Insecure {
					t.Errorf("defaults: %s", c)
				}
				if c.ShortDelay != 3*time.Second || c.LongDelay != 10*time.Second || c.Jitter != 0.25 {
					t.Errorf("delays %s/%s/%v, want metal3's 3s/10s/25%%", c.ShortDelay, c.LongDelay, c.Jitter)
				}
			},
		},
		"everything set": {
			env: map[string]string{
				EnvEndpoint: "https://ironic.example:6385/v1/", EnvInsecure: "True", EnvClientTimeout: "45s",
				EnvProvisioningLimit: "7", EnvDeployKernelURL: "http://x/k", EnvDeployRamdiskURL: "http://x/r",
				EnvDeployISOURL: "http://user:urlpass@x/iso", EnvLiveISOPersistent: "Never",
			},
			auth: map[string]string{"username": "admin\n", "password": "s3cret\n"},
			check: func(t *testing.T, c Config) {
				t.Helper()
				if !c.Insecure || c.ClientTimeout != 45*time.Second || c.ProvisioningLimit != 7 ||
					c.DeployISOURL != "http://user:urlpass@x/iso" || c.LiveISOForcePersistentBootDevice != "Never" {
					t.Errorf("config %s", c)
				}
				if c.Username != "admin" || c.Password != "s3cret" {
					t.Errorf("credentials %q/%q, want admin/s3cret (trimmed)", c.Username, c.Password)
				}
				if strings.Contains(c.String(), "s3cret") || strings.Contains(c.String(), "urlpass") {
					t.Errorf("String shows a password: %s", c)
				}
			},
		},
		"missing endpoint":   {env: map[string]string{}, wantErr: []string{EnvEndpoint + " is required"}},
		"endpoint not a URL": {env: map[string]string{EnvEndpoint: "ironic:6385"}, wantErr: []string{EnvEndpoint + `="ironic:6385"`}},
		"malformed values": {
			env: map[string]string{
				EnvEndpoint: "http://i/v1/", EnvInsecure: "maybe", EnvClientTimeout: "30", EnvProvisioningLimit: "-1",
			},
			wantErr: []string{EnvInsecure + `="maybe"`, EnvClientTimeout + `="30"`, EnvProvisioningLimit + `="-1"`},
		},
		"kernel without ramdisk": {
			env:     map[string]string{EnvEndpoint: "http://i/v1/", EnvDeployKernelURL: "http://x/k"},
			wantErr: []string{EnvDeployKernelURL + " and " + EnvDeployRamdiskURL},
		},
		"kernel without ramdisk, with an image builder (OpenShift's configuration)": {
			env:     map[string]string{EnvEndpoint: "http://i/v1/", EnvDeployKernelURL: "http://x/k"},
			builder: true,
			check: func(t *testing.T, c Config) {
				t.Helper()
				if !c.PreprovisioningImageBuilder || c.DeployKernelURL != "http://x/k" {
					t.Errorf("config %s, builder %t", c, c.PreprovisioningImageBuilder)
				}
			},
		},
		"username without password": {
			env:     map[string]string{EnvEndpoint: "http://i/v1/"},
			auth:    map[string]string{"username": "admin"},
			wantErr: []string{EnvAuthRootDir, "both be present"},
		},
		"missing CA file": {
			env:     map[string]string{EnvEndpoint: "https://i/v1/", EnvCACertFile: "/nonexistent/ca.pem"},
			wantErr: []string{EnvCACertFile},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{EnvAuthRootDir: authDir(t, tc.auth)}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := configFrom(func(k string) string { return env[k] }, func(c *Config) { c.PreprovisioningImageBuilder = tc.builder })
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tc.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}
