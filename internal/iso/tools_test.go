package iso

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tool finds one of the Debian programs the independent-reader tests run. `make test` installs
// them (hack/host-packages.sh: xorriso, and genisoimage for genisoimage and isoinfo).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed; `make test` installs it (hack/host-packages.sh, Debian packages xorriso and genisoimage)", name)
	}
	return p
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// srcTree writes files under a new directory, for the tools to build images from.
func srcTree(t *testing.T, files []File) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(cleanPath(f.Path)))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		must(t, os.WriteFile(p, f.Data, mode))
	}
	return dir
}

// isoinfoEntry is one line of `isoinfo -l`.
type isoinfoEntry struct {
	mode       string
	links      int
	size       int64
	date       string
	lba        int64
	name       string
	dir        string
	isDirEntry bool
}

var isoinfoLine = regexp.MustCompile(`^([-dl][-rwxsStT]{9})\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\w{3}\s+\d+\s+\d{4})\s+\[\s*(\d+)\s+\d+\]\s+(.*?)\s*$`)

// isoinfoList runs `isoinfo -l` (with -R: Rock Ridge names) and parses every record.
func isoinfoList(t *testing.T, image string, rockRidge bool) []isoinfoEntry {
	t.Helper()
	args := []string{"-l", "-i", image}
	if rockRidge {
		args = append([]string{"-R"}, args...)
	}
	var out []isoinfoEntry
	dir := ""
	for _, line := range strings.Split(string(run(t, "isoinfo", args...)), "\n") {
		if d, ok := strings.CutPrefix(line, "Directory listing of "); ok {
			dir = d
			continue
		}
		m := isoinfoLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		e := isoinfoEntry{mode: m[1], date: strings.Join(strings.Fields(m[6]), " "), name: m[8], dir: dir, isDirEntry: m[1][0] == 'd'}
		e.links, _ = strconv.Atoi(m[2])
		e.size, _ = strconv.ParseInt(m[5], 10, 64)
		e.lba, _ = strconv.ParseInt(m[7], 10, 64)
		out = append(out, e)
	}
	if len(out) == 0 {
		t.Fatalf("isoinfo listed nothing for %s", image)
	}
	return out
}

var xorrisoLsdl = regexp.MustCompile(`^\S{10}\s+\d+\s+(\d+)\s+(\d+)\s+\d+\s+(\w{3}\s+\d+\s+\S+)\s+'(.*)'$`)

// xorrisoList lists "uid:gid date" by path as xorriso reads them from Rock Ridge PX and TF
// (isoinfo 1.1.11 prints owners other than 0 wrongly and shows the ISO 9660 record's date).
func xorrisoList(t *testing.T, image string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(string(run(t, "xorriso", "-indev", image, "-find", "/", "-exec", "lsdl")), "\n") {
		if m := xorrisoLsdl.FindStringSubmatch(line); m != nil {
			out[m[4]] = m[1] + ":" + m[2] + " " + strings.Join(strings.Fields(m[3]), " ")
		}
	}
	if len(out) == 0 {
		t.Fatalf("xorriso listed nothing for %s", image)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeImage(t *testing.T, opts Options, files []File) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.iso")
	must(t, WriteFile(p, opts, files))
	return p
}
