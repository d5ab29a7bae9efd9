package ironicrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestESPWarning: a missing EFI system partition image is named at start, with what it breaks.
func TestESPWarning(t *testing.T) {
	esp := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(esp, []byte("fat"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w := ESPWarning(Config{ESPImage: esp}); w != "" {
		t.Errorf("an existing image: %q", w)
	}
	for name, c := range map[string]Config{"none": {}, "missing": {ESPImage: esp + ".gone"}} {
		w := ESPWarning(c)
		for _, want := range []string{"IRONIC_ESP_IMAGE", "UEFI virtual media", "image-customization-controller"} {
			if !strings.Contains(w, want) {
				t.Errorf("%s: warning %q lacks %q", name, w, want)
			}
		}
	}
	if w := ESPWarning(Config{}); !strings.Contains(w, DefaultESPImage) {
		t.Errorf("warning %q does not name %s", w, DefaultESPImage)
	}
}
