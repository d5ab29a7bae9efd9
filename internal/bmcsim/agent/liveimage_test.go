package agent

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/iso"
)

// ignitionArchive is what an image customization controller puts into an image: a gzip'd newc
// cpio with config.ign writing the agent's configuration and keyfiles. Written here from the
// formats, not with the controller's code.
func ignitionArchive(t *testing.T, apiURL string, keyfiles map[string]string) []byte {
	t.Helper()
	type file struct {
		Path     string `json:"path"`
		Contents struct {
			Source string `json:"source"`
		} `json:"contents"`
	}
	var files []file
	add := func(p, data string) {
		f := file{Path: p}
		f.Contents.Source = "data:;base64," + base64.StdEncoding.EncodeToString([]byte(data))
		files = append(files, f)
	}
	add("/etc/ironic-python-agent.conf", "[DEFAULT]\napi_url = "+apiURL+"\ninsecure = True\n")
	for name, data := range keyfiles {
		add("/etc/NetworkManager/system-connections/"+name, data)
	}
	config, err := json.Marshal(map[string]any{"ignition": map[string]string{"version": "3.2.0"}, "storage": map[string]any{"files": files}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	cw := cpio.NewWriter(zw)
	if err := cw.WriteHeader(&cpio.Header{Name: "config.ign", Mode: cpio.TypeReg | 0o644, Size: int64(len(config))}); err != nil {
		t.Fatal(err)
	}
	_, _ = cw.Write(config)
	if err := errors.Join(cw.Close(), zw.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const (
	ethByMAC = "[connection]\nid=eno1\ntype=ethernet\n\n[ethernet]\nmac-address=52:54:00:00:00:01\n\n[ipv4]\naddress1=192.0.2.10/24,192.0.2.1\nmethod=manual\n\n[ipv6]\naddress1=2001:db8::10/64\nmethod=manual\n"
	bond     = "[connection]\nid=bond0\ntype=bond\ninterface-name=bond0\n\n[ipv4]\nmethod=disabled\n"
	port1    = "[connection]\nid=eno2\ntype=ethernet\ninterface-name=eno2\nmaster=bond0\nslave-type=bond\n"
	port2    = "[connection]\nid=eno3\ntype=ethernet\ninterface-name=eno3\nmaster=bond0\nslave-type=bond\n"
	vlanOn   = "[connection]\nid=vlan7\ntype=vlan\ninterface-name=vlan7\n\n[vlan]\nid=7\nparent=bond0\n\n[ipv4]\naddress1=198.51.100.7/24\nmethod=manual\n"
)

// liveISO writes a CoreOS-layout ISO and puts archive into its embed area, as a controller
// serves it.
func liveISO(t *testing.T, o deployimage.LiveOptions, archive []byte) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "live.iso")
	if err := deployimage.WriteLiveISO(p, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	im, err := iso.Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	area, err := im.Locate(deployimage.LiveEmbedPath)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[area.Offset:area.Offset+area.Length], archive)
	return data
}

func TestParseLiveISO(t *testing.T) {
	archive := ignitionArchive(t, "http://10.1.2.3:6385,http://10.1.2.4:6385", map[string]string{
		"eno1.nmconnection": ethByMAC, "bond0.nmconnection": bond, "eno2.nmconnection": port1, "eno3.nmconnection": port2, "vlan7.nmconnection": vlanOn,
	})
	bi, err := ParseBootISO(liveISO(t, deployimage.LiveOptions{}, archive))
	if err != nil {
		t.Fatal(err)
	}
	if !bi.Ignition || bi.APIURL != "http://10.1.2.3:6385" || bi.RootfsURL != "" || bi.Params["ignition.platform.id"] != "metal" {
		t.Errorf("boot info %+v", bi)
	}
	// The agent configuration's insecure = True, as ipa-insecure=1.
	if bi.Params["ipa-insecure"] != "1" {
		t.Errorf("insecure = True in the agent configuration: params %v", bi.Params)
	}
	want := map[string]NICAddress{
		"52:54:00:00:00:01": {MAC: "52:54:00:00:00:01", IPv4: "192.0.2.10", IPv6: "2001:db8::10"},
		"eno2":              {Interface: "eno2", IPv4: "198.51.100.7"}, // the VLAN on the bond, on its first port
	}
	if len(bi.Network) != len(want) {
		t.Fatalf("network %+v", bi.Network)
	}
	for _, a := range bi.Network {
		k := a.Interface + a.MAC
		if want[k] != a {
			t.Errorf("%s: %+v, want %+v", k, a, want[k])
		}
	}
	inv := Inventory{Interfaces: []Interface{{Name: "eno1", MACAddress: "52:54:00:00:00:01"}, {Name: "eno2", MACAddress: "52:54:00:00:00:02"}, {Name: "eno3"}}}
	applyNetwork(&inv, bi.Network)
	if inv.Interfaces[0].IPv4Address != "192.0.2.10" || inv.Interfaces[0].IPv6Address != "2001:db8::10" || inv.Interfaces[1].IPv4Address != "198.51.100.7" || inv.Interfaces[2].IPv4Address != "" {
		t.Errorf("inventory %+v", inv.Interfaces)
	}

	// A pristine live ISO (zero-filled area): no Ignition, the command line's URL if any.
	bi, err = ParseBootISO(liveISO(t, deployimage.LiveOptions{}, nil))
	if err != nil || bi.Ignition || bi.APIURL != "" || bi.Params["ipa-insecure"] != "" {
		t.Errorf("pristine: %+v, %v", bi, err)
	}
	// A live ISO without its root filesystem and without coreos.live.rootfs_url cannot boot.
	if _, err := ParseBootISO(liveISO(t, deployimage.LiveOptions{NoRootfs: true}, archive)); err == nil || !strings.Contains(err.Error(), "coreos.live.rootfs_url") {
		t.Errorf("no root filesystem: %v", err)
	}
}

// An initramfs with the Ignition appended, inside the boot ISO Ironic builds from a kernel and
// ramdisk (the initrd format of a PreprovisioningImage on a virtual media BMC).
func TestParseAppendedInitramfs(t *testing.T) {
	initrd := deployimage.LiveInitramfs()
	initrd = append(initrd, make([]byte, (4-len(initrd)%4)%4)...)
	initrd = append(initrd, ignitionArchive(t, "http://10.9.9.9:6385", map[string]string{"eno1.nmconnection": ethByMAC})...)
	grub := "menuentry \"boot_partition\" {\nlinux /vmlinuz ipa-api-url=http://192.0.2.1:6385 coreos.live.rootfs_url=http://images/rootfs.img ignition.firstboot --\ninitrd /initrd\n}\n"
	var b bytes.Buffer
	if err := iso.Write(&b, iso.Options{VolumeID: "VMEDIA_BOOT_ISO"}, []iso.File{
		{Path: deployimage.ISOKernelPath, Data: deployimage.Kernel()},
		{Path: deployimage.ISORamdiskPath, Data: initrd},
		{Path: deployimage.ISOGrubPath, Data: []byte(grub)},
	}); err != nil {
		t.Fatal(err)
	}
	bi, err := ParseBootISO(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// The agent's configuration file wins over the command line, as in ironic-python-agent.
	if !bi.Ignition || bi.APIURL != "http://10.9.9.9:6385" || bi.RootfsURL != "http://images/rootfs.img" || len(bi.Network) != 1 {
		t.Errorf("boot info %+v", bi)
	}
}

// The live system fetches its root filesystem before the agent starts; without it nothing runs.
// Booted, the agent looks Ironic up at the URL its Ignition names, not at the fallback: an image
// naming another Ironic never finds the right one.
func TestLiveBoot(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/rootfs.img" {
			_, _ = io.WriteString(w, "rootfs")
			return
		}
		http.NotFound(w, r) // this "Ironic" knows no node
	}))
	defer srv.Close()
	seen := func(p string) int { mu.Lock(); defer mu.Unlock(); return paths[p] }
	fallback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the fallback Ironic was called: %s", r.URL.Path)
	}))
	defer fallback.Close()
	r, err := NewRunner(Config{APIURL: fallback.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	archive := ignitionArchive(t, srv.URL, nil)
	missing := liveISO(t, deployimage.LiveOptions{NoRootfs: true, ExtraKargs: "coreos.live.rootfs_url=" + srv.URL + "/missing.img"}, archive)
	if err := r.Boot(&fakeMachine{}, missing); err == nil || !strings.Contains(err.Error(), "root filesystem") {
		t.Errorf("boot without a root filesystem: %v", err)
	}
	minimal := liveISO(t, deployimage.LiveOptions{NoRootfs: true, ExtraKargs: "coreos.live.rootfs_url=" + srv.URL + "/rootfs.img"}, archive)
	if err := r.Boot(&fakeMachine{}, minimal); err != nil {
		t.Fatal(err)
	}
	if seen("/rootfs.img") != 1 {
		t.Errorf("root filesystem fetched %d times", seen("/rootfs.img"))
	}
	for deadline := time.Now().Add(10 * time.Second); seen("/v1/lookup") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not look itself up at its Ignition's Ironic")
		}
	}
	if !r.Running("m1") {
		t.Error("the agent stopped: it keeps looking for its Ironic")
	}
}

// TestInspectionNeedsACallback: ironic-python-agent inspects only with an inspection callback (a
// kernel parameter Ironic adds to an ISO it builds, or inspection_callback_url in the agent's
// configuration): a customized live image without one does not inspect, even while Ironic waits
// for an inspection (the project's own deploy ISO, standing for metal3's configured images, does).
func TestInspectionNeedsACallback(t *testing.T) {
	conf := "[DEFAULT]\napi_url = https://192.0.2.2:6385\ninspection_callback_url = https://192.0.2.2:6385/v1/continue_inspection\n"
	ign := `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ironic-python-agent.conf","contents":{"source":"data:;base64,` +
		base64.StdEncoding.EncodeToString([]byte(conf)) + `"}}]}}`
	lc, err := parseIgnition([]byte(ign))
	if err != nil || lc.InspectionCallbackURL != "https://192.0.2.2:6385/v1/continue_inspection" {
		t.Fatalf("callback %q, %v", lc.InspectionCallbackURL, err)
	}
	inspecting := &lookupResponse{}
	inspecting.Node.DriverInternalInfo = map[string]any{"inspector_manage_boot": true}
	for name, tc := range map[string]struct {
		boot BootInfo
		want bool
	}{
		"customized image without a callback": {boot: BootInfo{Ignition: true}},
		"customized image with one":           {boot: BootInfo{Ignition: true, InspectionCallbackURL: lc.InspectionCallbackURL}, want: true},
		"the project's deploy ISO":            {boot: BootInfo{}, want: true},
	} {
		a := &agentInstance{boot: tc.boot}
		if got := a.shouldInspect(inspecting); got != tc.want {
			t.Errorf("%s: inspects %v, want %v", name, got, tc.want)
		}
	}
}
