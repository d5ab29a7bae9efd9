package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A library ldd cannot find (ldd still exits 0) fails the image build instead of leaving a
// program that cannot start in the image.
func TestHostProgramWithMissingLibrary(t *testing.T) {
	dir := t.TempDir()
	ldd := "#!/bin/sh\nprintf '\\tlinux-vdso.so.1 (0x00007ffd)\\n\\tlibnm.so.0 => not found\\n\\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\\n'\n"
	if err := os.WriteFile(filepath.Join(dir, "ldd"), []byte(ldd), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, err := hostProgramFiles([]string{"sh"})
	if err == nil || !strings.Contains(err.Error(), "libnm.so.0") {
		t.Fatalf("a missing library was not reported: %v", err)
	}
}
