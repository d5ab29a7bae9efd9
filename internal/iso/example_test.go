package iso_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/metalforge/metalforge/internal/iso"
)

// A CoreOS-layout live ISO keeps a zero-filled Ignition embed area in images/ignition.img and
// says where it is in coreos/igninfo.json. A customizer opens the base image on disk, reads the
// small JSON file and locates the area, so it can serve the image with the area replaced without
// copying or loading the rest.
func ExampleImage_Locate() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	base := filepath.Join(dir, "live.iso")
	err := iso.WriteFile(base, iso.Options{VolumeID: "LIVE"}, []iso.File{
		{Path: "coreos/igninfo.json", Data: []byte(`{"file": "images/ignition.img"}`)},
		{Path: "images/ignition.img", Data: make([]byte, 256<<10)},
	})
	if err != nil {
		panic(err)
	}

	im, err := iso.OpenFile(base)
	if err != nil {
		panic(err)
	}
	defer im.Close()
	info, _ := im.ReadFile("/coreos/igninfo.json")
	area, _ := im.Locate("/images/ignition.img")
	fmt.Printf("%s\n%d bytes at byte %d (sector %d)\n", info, area.Length, area.Offset, area.Offset/iso.SectorSize)

	// The same bytes through a reader that reads the image on demand.
	r, _ := im.Open("images/ignition.img")
	n, _ := io.Copy(io.Discard, r)
	fmt.Println(n == area.Length)

	entries, _ := im.ReadDir("/")
	for _, e := range entries {
		fmt.Println(e.Name, e.IsDir)
	}
	// Output:
	// {"file": "images/ignition.img"}
	// 262144 bytes at byte 51200 (sector 25)
	// true
	// coreos true
	// images true
}
