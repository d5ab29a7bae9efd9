package ironicrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFillTFTPRoot: dnsmasq mode puts both iPXE loaders from the image into the TFTP root on the
// shared volume (dnsmasq's TFTP root is otherwise empty), and names a loader the image lacks.
func TestFillTFTPRoot(t *testing.T) {
	src, shared := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{EFILoader: "efi", BIOSLoader: "bios", "ipxe.iso": "iso"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := Config{SharedDir: shared, IPXEDir: src}
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, f) }
	if err := FillTFTPRoot(c, logf); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(shared, "tftpboot"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != "snponly.efi,undionly.kpxe" || len(logged) != 0 {
		t.Fatalf("tftpboot holds %v (logged %q), want the two loaders", got, logged)
	}
	if b, _ := os.ReadFile(filepath.Join(shared, "tftpboot", BIOSLoader)); string(b) != "bios" {
		t.Errorf("%s holds %q", BIOSLoader, b)
	}
	// A restart copies them again; a missing loader is reported, the other still copied.
	if err := os.Remove(filepath.Join(src, BIOSLoader)); err != nil {
		t.Fatal(err)
	}
	if err := FillTFTPRoot(c, logf); err != nil {
		t.Fatal(err)
	}
	if len(logged) != 1 {
		t.Errorf("a missing loader logged %q", logged)
	}
}

func TestIPXEDirDefault(t *testing.T) {
	c, err := FromEnv(env(map[string]string{}))
	if err != nil || c.IPXEDir != "/usr/lib/ipxe" {
		t.Fatalf("IPXEDir %q, %v", c.IPXEDir, err)
	}
	c, _ = FromEnv(env(map[string]string{"IPXE_CUSTOM_FIRMWARE_DIR": "/firmware"}))
	if c.IPXEDir != "/firmware" {
		t.Errorf("IPXEDir %q", c.IPXEDir)
	}
}
