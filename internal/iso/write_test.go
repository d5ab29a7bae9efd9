package iso

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sample is a tree with what the project's images hold: nested directories, a file over several
// sectors, an empty file, long lower-case names, a directory whose records need more than one
// sector, and an executable.
func sample() []File {
	files := []File{
		{Path: "vmlinuz", Data: []byte("kernel")},
		{Path: "initrd", Data: bytes.Repeat([]byte("0123456789abcdef"), 1000)},
		{Path: "/EFI/BOOT/grub.cfg", Data: []byte("linux /vmlinuz a=b --\n")},
		{Path: "boot/grub/efiboot.img", Data: nil},
		{Path: "coreos/igninfo.json", Data: []byte(`{"file": "images/ignition.img"}`)},
		{Path: "images/pxeboot/a-rather-long-file-name-that-rock-ridge-keeps.img", Data: []byte("long")},
		{Path: "bin/run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755},
	}
	for i := range 80 {
		files = append(files, File{Path: fmt.Sprintf("many/f%02d.txt", i), Data: []byte{byte(i)}})
	}
	return files
}

func TestRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "big.img")
	big := bytes.Repeat([]byte("from disk "), 50000)
	must(t, os.WriteFile(src, big, 0o600))
	files := append(sample(), File{Path: "images/big.img", Source: src})
	want := map[string][]byte{"images/big.img": big}
	for _, f := range sample() {
		want[cleanPath(f.Path)] = f.Data
	}

	var buf bytes.Buffer
	must(t, Write(&buf, Options{VolumeID: "TEST_VOL"}, files))
	img := buf.Bytes()
	if len(img)%SectorSize != 0 {
		t.Errorf("image size %d is not a multiple of the sector size", len(img))
	}
	im, err := Open(bytes.NewReader(img), int64(len(img)))
	must(t, err)
	if im.VolumeID() != "TEST_VOL" {
		t.Errorf("volume id %q", im.VolumeID())
	}
	for p, data := range want {
		got, err := im.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes differ from the %d written", p, len(got), len(data))
		}
		x, err := im.Locate("/" + p)
		must(t, err)
		if x.Offset%SectorSize != 0 || x.Length != int64(len(data)) || !bytes.Equal(img[x.Offset:x.Offset+x.Length], data) {
			t.Errorf("%s: extent %+v does not hold the content", p, x)
		}
	}
	root, err := im.ReadDir("/")
	must(t, err)
	if got, want := names(root), "EFI bin boot coreos images initrd many vmlinuz"; got != want {
		t.Errorf("root lists %q, want %q", got, want)
	}
	many, err := im.ReadDir("many")
	must(t, err)
	if len(many) != 80 {
		t.Errorf("many/ lists %d entries, want 80", len(many))
	}
	if e, err := im.Stat("bin/run.sh"); err != nil || e.Mode.Perm() != 0o755 || e.IsDir {
		t.Errorf("bin/run.sh: %+v, %v", e, err)
	}
	if e, err := im.Stat("vmlinuz"); err != nil || e.Mode.Perm() != 0o644 {
		t.Errorf("vmlinuz: %+v, %v (want mode 0644)", e, err)
	}
	if e, err := im.Stat("EFI/BOOT"); err != nil || !e.IsDir || e.Mode.Perm() != 0o755 {
		t.Errorf("EFI/BOOT: %+v, %v", e, err)
	}
}

func names(entries []Entry) string {
	var n []string
	for _, e := range entries {
		n = append(n, e.Name)
	}
	sort.Strings(n)
	return strings.Join(n, " ")
}

// TestReproducible: the same files give the same bytes whatever the order they are given in, the
// umask, the local time zone and the clock; a different Time gives different bytes.
func TestReproducible(t *testing.T) {
	files := sample()
	first := build1(t, Options{VolumeID: "R"}, files)

	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	oldMask := syscall.Umask(0o077)
	oldLocal := time.Local
	time.Local = time.FixedZone("UTC+5:45", 5*3600+45*60)
	second := build1(t, Options{VolumeID: "R"}, reversed)
	syscall.Umask(oldMask)
	time.Local = oldLocal
	if !bytes.Equal(first, second) {
		t.Fatalf("the same files gave different images (%d and %d bytes); first difference at byte %d", len(first), len(second), firstDiff(first, second))
	}

	other := build1(t, Options{VolumeID: "R", Time: time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)}, files)
	if bytes.Equal(first, other) {
		t.Error("Options.Time does not reach the image")
	}
}

func build1(t *testing.T, opts Options, files []File) []byte {
	t.Helper()
	var b bytes.Buffer
	must(t, Write(&b, opts, files))
	return b.Bytes()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTimesOwnersLinksFixed checks with isoinfo, an independent reader, that every record of an
// image carries Options.Time, owner 0 and the link counts of a tree, although the staged files
// were owned by whoever ran the test and go-diskfs stamps the clock.
func TestTimesOwnersLinksFixed(t *testing.T) {
	p := writeImage(t, Options{Time: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)}, sample())
	entries := isoinfoList(t, p, true)
	subdirs := map[string]int{}
	for _, e := range entries {
		if e.isDirEntry && e.name != "." && e.name != ".." {
			subdirs[e.dir]++
		}
	}
	for _, e := range entries {
		if e.date != "Mar 4 2031" {
			t.Errorf("%s%s: date %q, want Mar 4 2031", e.dir, e.name, e.date)
		}
		wantLinks := 1
		if e.isDirEntry {
			dir := e.dir + e.name + "/"
			switch e.name {
			case ".":
				dir = e.dir
			case "..":
				dir = parentListing(e.dir)
			}
			wantLinks = 2 + subdirs[dir]
		}
		if e.links != wantLinks {
			t.Errorf("%s%s: %d links, want %d", e.dir, e.name, e.links, wantLinks)
		}
	}
	for path, rr := range xorrisoList(t, p) {
		if rr != "0:0 Mar 4 2031" {
			t.Errorf("%s: Rock Ridge owner and time %q, want 0:0 Mar 4 2031", path, rr)
		}
	}
	info := string(run(t, "isoinfo", "-d", "-i", p))
	if !strings.Contains(info, "Rock Ridge signatures version 1 found") {
		t.Errorf("isoinfo finds no Rock Ridge:\n%s", info)
	}
	pvd := readPVD(t, p)
	if got := string(pvd[813:829]); got != "2031030405060700" {
		t.Errorf("volume creation time %q", got)
	}
	if got := string(pvd[847:863]); got != "0000000000000000" {
		t.Errorf("volume expiration time %q, want not specified", got)
	}
}

// parentListing turns isoinfo's "/a/b/" into "/a/" ("/" stays "/").
func parentListing(dir string) string {
	if dir == "/" {
		return dir
	}
	d := strings.TrimSuffix(dir, "/")
	return d[:strings.LastIndex(d, "/")+1]
}

func readPVD(t *testing.T, image string) []byte {
	t.Helper()
	data, err := os.ReadFile(image)
	must(t, err)
	return data[16*SectorSize : 17*SectorSize]
}

// TestGoDiskfsStampsTheClock pins down the library behaviour makeReproducible exists for: without
// it the volume descriptor carries the time of the build. If go-diskfs grows an option for a fixed
// time, this fails and the post-processing can shrink.
func TestGoDiskfsStampsTheClock(t *testing.T) {
	before := time.Now().Truncate(time.Second)
	f, err := os.Create(filepath.Join(t.TempDir(), "raw.iso"))
	must(t, err)
	defer f.Close()
	must(t, layout(f, Options{}, sample()))
	after := time.Now()
	pvd := make([]byte, SectorSize)
	_, err = f.ReadAt(pvd, 16*SectorSize)
	must(t, err)
	stamped, err := time.ParseInLocation("20060102150405", string(pvd[813:827]), time.Local)
	must(t, err)
	if stamped.Before(before) || stamped.After(after) {
		t.Errorf("go-diskfs stamped %s, not the build time (%s to %s)", stamped, before, after)
	}
	must(t, makeReproducible(f, DefaultTime))
	_, err = f.ReadAt(pvd, 16*SectorSize)
	must(t, err)
	if got := string(pvd[813:829]); got != "2024010100000000" {
		t.Errorf("after makeReproducible the creation time is %q", got)
	}
}

// TestMakeReproducibleOnGenisoimage runs the post-processing on an image another tool made from
// files with a foreign owner and old times (genisoimage -R keeps both), so it is checked against
// a layout it was not written for. genisoimage splits a long name's NM entry and moves the PX and
// TF entries after it to a continuation area, which the walk must follow.
func TestMakeReproducibleOnGenisoimage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the source files a foreign owner")
	}
	src := srcTree(t, sample())
	long := strings.Repeat("x", 200) // a Rock Ridge name this long goes to a continuation area
	must(t, os.WriteFile(filepath.Join(src, long), []byte("long name"), 0o644))
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	must(t, filepath.Walk(src, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, 1234, 5678); err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	}))
	p := filepath.Join(t.TempDir(), "g.iso")
	run(t, "genisoimage", "-quiet", "-R", "-o", p, src)
	before := isoinfoList(t, p, true)
	if rr := xorrisoList(t, p)["/"+long]; rr != "1234:5678 Feb 3 2001" || before[len(before)-1].date != "Feb 3 2001" {
		t.Fatalf("genisoimage did not keep owner and time (%q, %+v)", rr, before[len(before)-1])
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	must(t, makeReproducible(f, DefaultTime))
	must(t, f.Close())
	after := isoinfoList(t, p, true)
	if len(after) != len(before) {
		t.Fatalf("%d records before, %d after", len(before), len(after))
	}
	for _, e := range after {
		if e.date != "Jan 1 2024" {
			t.Errorf("%s%s: date %q after makeReproducible", e.dir, e.name, e.date)
		}
	}
	rr := xorrisoList(t, p)
	if _, ok := rr["/"+long]; !ok {
		t.Error("the 200-byte Rock Ridge name is gone")
	}
	for path, got := range rr {
		if got != "0:0 Jan 1 2024" {
			t.Errorf("%s: Rock Ridge owner and time %q after makeReproducible", path, got)
		}
	}
	im, err := OpenFile(p)
	must(t, err)
	defer im.Close()
	if got, err := im.ReadFile("EFI/BOOT/grub.cfg"); err != nil || !strings.Contains(string(got), "linux /vmlinuz") {
		t.Errorf("reading grub.cfg after makeReproducible: %q, %v", got, err)
	}
}

// TestShortNamesAsGoDiskfs checks checkShortNames' copy of go-diskfs's 8.3 naming against what
// go-diskfs writes, read back by isoinfo without Rock Ridge.
func TestShortNamesAsGoDiskfs(t *testing.T) {
	in := []string{"grub.cfg", "a-rather-long-name.tar.gz", "vmlinuz", "igninfo.json", "Mixed Case.Ext"}
	var files []File
	want := map[string]bool{}
	for _, n := range in {
		files = append(files, File{Path: n, Data: []byte(n)})
		want[shortName(n)+";1"] = true
	}
	for _, e := range isoinfoList(t, writeImage(t, Options{}, files), false) {
		if e.isDirEntry {
			continue
		}
		if !want[e.name] {
			t.Errorf("go-diskfs wrote %q, not one of the names shortName predicts (%v)", e.name, want)
		}
		delete(want, e.name)
	}
	if len(want) != 0 {
		t.Errorf("names not written: %v", want)
	}
}

// TestClashingShortNamesVary shows why Write refuses two clashing 8.3 groups in one directory:
// go-diskfs numbers the groups in map order, so the image changes from run to run. (Each layout
// has an even chance of either order; 40 layouts agreeing would take a 1 in 2^39 coincidence.)
func TestClashingShortNamesVary(t *testing.T) {
	files := []File{{Path: "config_a1.x"}, {Path: "config_a2.x"}, {Path: "config_b1.x"}, {Path: "config_b2.x"}}
	if _, err := plan(files); err == nil {
		t.Fatal("plan accepted two clashing 8.3 groups")
	}
	seen := map[string]bool{}
	dir := t.TempDir()
	for i := range 40 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		must(t, err)
		ws := t.TempDir()
		must(t, stage(ws, files))
		must(t, finalize(f, ws, Options{}))
		data, err := os.ReadFile(f.Name())
		must(t, err)
		f.Close()
		seen[string(data[18*SectorSize:19*SectorSize])] = true // the root directory's records
	}
	if len(seen) < 2 {
		t.Error("go-diskfs laid out clashing groups the same way 40 times: the refusal in checkShortNames may be obsolete")
	}
}

func TestRefused(t *testing.T) {
	deep := strings.Repeat("d/", maxDirDepth+1) + "f"
	for name, tc := range map[string]struct {
		opts  Options
		files []File
		want  string
	}{
		"empty path":        {files: []File{{Path: "/"}}, want: "invalid file path"},
		"twice":             {files: []File{{Path: "a"}, {Path: "/a"}}, want: "given twice"},
		"file and dir":      {files: []File{{Path: "a"}, {Path: "a/b"}}, want: "both a file and a directory"},
		"dir and file":      {files: []File{{Path: "a/b"}, {Path: "a"}}, want: "both a file and a directory"},
		"data and source":   {files: []File{{Path: "a", Data: []byte("x"), Source: "/etc/hostname"}}, want: "not both"},
		"too deep":          {files: []File{{Path: deep}}, want: "directory levels"},
		"long name":         {files: []File{{Path: strings.Repeat("n", 256)}}, want: "longer than 255"},
		"two 8.3 groups":    {files: []File{{Path: "d/config_a1.x"}, {Path: "d/config_a2.x"}, {Path: "d/config_b1.x"}, {Path: "d/config_b2.x"}}, want: "directory d: names clash"},
		"long volume id":    {opts: Options{VolumeID: strings.Repeat("V", 33)}, want: "VolumeID"},
		"missing source":    {files: []File{{Path: "a", Source: "/nonexistent/file"}}, want: "staging a"},
		"boot file missing": {opts: Options{Boot: &Boot{Entries: []BootEntry{{Platform: EFI, File: "efi.img"}}}}, files: []File{{Path: "a"}}, want: `Boot.Entries[0].File "efi.img"`},
		"boot no entries":   {opts: Options{Boot: &Boot{}}, want: "no entries"},
		"boot platform":     {opts: Options{Boot: &Boot{Entries: []BootEntry{{Platform: 7, File: "a"}}}}, files: []File{{Path: "a"}}, want: "Platform"},
		"catalog clash":     {opts: Options{Boot: &Boot{Entries: []BootEntry{{Platform: EFI, File: "boot.catalog"}}}}, files: []File{{Path: "boot.catalog"}}, want: "Boot.Catalog"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tc.opts, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// One clashing group is renamed the same way every time, so it is allowed.
	must(t, Write(&bytes.Buffer{}, Options{}, []File{{Path: "config_a1.x"}, {Path: "config_a2.x"}, {Path: strings.Repeat("d/", maxDirDepth) + "f"}}))
}

func TestWriteFileReplacesAndCleansUp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out.iso")
	must(t, os.WriteFile(p, bytes.Repeat([]byte("old"), 100000), 0o644))
	must(t, WriteFile(p, Options{}, []File{{Path: "a", Data: []byte("new")}}))
	im, err := OpenFile(p)
	must(t, err)
	defer im.Close()
	if got, err := im.ReadFile("a"); err != nil || string(got) != "new" {
		t.Errorf("a: %q, %v", got, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.iso")
	if err := WriteFile(bad, Options{}, []File{{Path: "a"}, {Path: "a"}}); err == nil {
		t.Fatal("duplicate accepted")
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed WriteFile left %s behind: %v", bad, err)
	}
}
