package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

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
