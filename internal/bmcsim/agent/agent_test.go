package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/iso"
)

type fakeMachine struct {
	mu       sync.Mutex
	off      bool
	disk     string
	failWith bool
}

func (m *fakeMachine) ID() string             { return "m1" }
func (m *fakeMachine) MACAddresses() []string { return []string{"52:54:00:00:00:01"} }
func (m *fakeMachine) Inventory() Inventory   { return Inventory{} }
func (m *fakeMachine) PowerOff()              { m.mu.Lock(); m.off = true; m.mu.Unlock() }
func (m *fakeMachine) WriteDisk(url string)   { m.mu.Lock(); m.disk = url; m.mu.Unlock() }
func (m *fakeMachine) FailDeploy() bool       { return m.failWith }
func (m *fakeMachine) LoseAgentToken() bool   { return false }
func (m *fakeMachine) isOff() bool            { m.mu.Lock(); defer m.mu.Unlock(); return m.off }

var _ Machine = (*fakeMachine)(nil)

func TestParseBootISO(t *testing.T) {
	image, err := deployimage.ISO("http://127.0.0.1:6385", "ipa-agent-token=tok", "ipa-inspection-callback-url=http://x/v1/continue_inspection")
	if err != nil {
		t.Fatal(err)
	}
	bi, err := ParseBootISO(image)
	if err != nil {
		t.Fatal(err)
	}
	if bi.APIURL != "http://127.0.0.1:6385" || bi.Token != "tok" || bi.InspectionCallbackURL != "http://x/v1/continue_inspection" {
		t.Errorf("parsed %+v", bi)
	}
	if _, ok := bi.Params["nofb"]; !ok {
		t.Errorf("flag parameter nofb missing: %v", bi.Params)
	}

	// Not the agent: an ISO without the marker kernel.
	var other bytes.Buffer
	if err := iso.Write(&other, iso.Options{VolumeID: "LIVE"}, []iso.File{{Path: "vmlinuz", Data: []byte("some kernel")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseBootISO(other.Bytes()); !errors.Is(err, ErrNotAgentImage) {
		t.Errorf("foreign ISO: %v", err)
	}
	// A damaged ISO still carrying the marker and command line: the raw fallback reads it.
	damaged := bytes.Clone(image)
	copy(damaged[16*2048+1:], "XXXXX")
	bi, err = ParseBootISO(damaged)
	if err != nil || bi.APIURL != "http://127.0.0.1:6385" {
		t.Errorf("damaged ISO: %+v, %v", bi, err)
	}
	if _, err := ParseBootISO([]byte("nothing")); !errors.Is(err, ErrNotAgentImage) {
		t.Errorf("garbage: %v", err)
	}
}

// TestParseIronicBootISO reads the boot ISO Ironic builds around the deploy kernel and ramdisk for
// virtual media: the same files, grub_conf.template, and the mkisofs call of
// ironic/common/images.py (create_esp_image_for_uefi, Ironic 39), with Debian's genisoimage as
// mkisofs.
func TestParseIronicBootISO(t *testing.T) {
	mkisofs, err := exec.LookPath("genisoimage")
	if err != nil {
		t.Skip("genisoimage is not installed; `make test` installs it (hack/host-packages.sh)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	grub := "set default=0\nset timeout=5\nset hidden_timeout_quiet=false\n\nmenuentry \"boot_partition\" {\n" +
		"linux /vmlinuz nofb ipa-agent-token=pregenerated ipa-api-url=http://192.0.2.1:6385 boot_method=vmedia --\ninitrd /initrd\n}\n"
	for name, data := range map[string][]byte{
		"vmlinuz":               deployimage.Kernel(),
		"initrd":                deployimage.Ramdisk(),
		"boot/grub/efiboot.img": deployimage.ESP(),
		"EFI/BOOT/grub.cfg":     []byte(grub),
	} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "boot.iso")
	cmd := exec.Command(mkisofs, "-quiet", "-r", "-V", "VMEDIA_BOOT_ISO", "-l", "-publisher", "ir_pub_id",
		"-e", "boot/grub/efiboot.img", "-no-emul-boot", "-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkisofs: %v\n%s", err, b)
	}
	image, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := ParseBootISO(image)
	if err != nil {
		t.Fatal(err)
	}
	if bi.APIURL != "http://192.0.2.1:6385" || bi.Token != "pregenerated" || bi.Params["boot_method"] != "vmedia" {
		t.Errorf("parsed %+v", bi)
	}
}

func TestParseCmdline(t *testing.T) {
	p := ParseCmdline(`nofb ipa-api-url=http://a:1,http://b:2 x="quoted" -- after=1`)
	if p["ipa-api-url"] != "http://a:1,http://b:2" || p["x"] != "quoted" {
		t.Errorf("%v", p)
	}
	if _, ok := p["after"]; ok {
		t.Errorf("parameters after -- must be ignored: %v", p)
	}
	if bi := newBootInfo("ipa-api-url=http://a:1,http://b:2"); bi.APIURL != "http://a:1" {
		t.Errorf("first API URL: %q", bi.APIURL)
	}
}

// TestCommandAPI checks the agent API semantics Ironic relies on: token check, busy (409), unknown
// commands, the command list with the last command last, and power off after standby.power_off.
func TestCommandAPI(t *testing.T) {
	r, err := NewRunner(Config{APIURL: "http://127.0.0.1:1", StepDuration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := &fakeMachine{}
	a := newAgent(r, m, BootInfo{Token: "secret"}, "http://127.0.0.1:1", "")
	base := r.srv.register(a) + "/v1/commands/"

	post := func(name string, params any, query string) (int, map[string]any) {
		b, _ := json.Marshal(map[string]any{"name": name, "params": params})
		resp, err := http.Post(base+"?"+query, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, _ := post("clean.get_clean_steps", nil, "wait=true&agent_token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: HTTP %d", code)
	}
	code, out := post("clean.get_clean_steps", map[string]any{}, "wait=true&agent_token=secret")
	if code != 200 || out["command_status"] != "SUCCEEDED" || out["command_name"] != "get_clean_steps" {
		t.Fatalf("get_clean_steps: %d %v", code, out)
	}
	if !strings.Contains(mustJSON(out["command_result"]), `"erase_devices_metadata"`) {
		t.Errorf("clean steps: %v", out["command_result"])
	}
	step := map[string]any{"interface": "deploy", "step": "burnin_cpu", "args": map[string]any{}}
	code, out = post("clean.execute_clean_step", map[string]any{"step": step}, "wait=false&agent_token=secret")
	if code != 200 || out["command_status"] != "RUNNING" {
		t.Fatalf("execute_clean_step: %d %v", code, out)
	}
	if code, out := post("clean.get_clean_steps", map[string]any{}, "agent_token=secret"); code != http.StatusConflict || !strings.Contains(strings.ToLower(mustJSON(out["faultstring"])), "agent is busy") {
		t.Errorf("busy agent: %d %v", code, out)
	}
	if code, _ := post("nope.nothing", nil, "agent_token=secret"); code != http.StatusBadRequest {
		t.Errorf("unknown command: HTTP %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		cmds := a.commandList()
		last := cmds[len(cmds)-1]
		if last.Status == statusSucceeded {
			res := last.Result.(map[string]any)
			if res["clean_step"].(map[string]any)["step"] != "burnin_cpu" {
				t.Errorf("result does not name the step: %v", res)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step did not finish: %+v", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, out = post("clean.execute_clean_step", map[string]any{"step": map[string]any{"interface": "deploy", "step": "no_such_step"}}, "wait=true&agent_token=secret")
	if code != 200 || out["command_status"] != "FAILED" || out["command_error"] == nil {
		t.Errorf("unknown step: %d %v", code, out)
	}
	if code, _ := post("standby.power_off", map[string]any{}, "wait=true&agent_token=secret"); code != 200 {
		t.Errorf("power_off: HTTP %d", code)
	}
	for deadline := time.Now().Add(2 * time.Second); !m.isOff(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("standby.power_off did not power the machine off")
		}
	}
	// A crashed agent does not answer at all.
	a.crash("test")
	if _, err := http.Get(base + "?agent_token=secret"); err == nil {
		t.Error("crashed agent answered")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHeartbeatSchedule checks IPA's heartbeat timing: the first heartbeat at once, an early one
// after a command ends but not sooner than MinHeartbeatInterval after the previous (the conductor
// may still hold the node from handling that one), a quick retry after a failure, and otherwise
// nothing before the interval.
func TestHeartbeatSchedule(t *testing.T) {
	const minGap = 300 * time.Millisecond
	var mu sync.Mutex
	var beats []time.Time
	fail := map[int]bool{1: true} // the second heartbeat gets a 503
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/v1/heartbeat/n1") {
			http.NotFound(w, req)
			return
		}
		mu.Lock()
		n := len(beats)
		beats = append(beats, time.Now())
		mu.Unlock()
		if fail[n] {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	r, err := NewRunner(Config{APIURL: srv.URL, HeartbeatInterval: time.Minute, MinHeartbeatInterval: minGap})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := newAgent(r, &fakeMachine{}, BootInfo{Token: "t"}, srv.URL, "")
	a.nodeUUID = "n1"
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(beats) }
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); count() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d heartbeats, want %d", count(), n)
			}
		}
	}
	go a.heartbeatLoop()
	defer a.stop()

	waitFor(1)
	a.heartbeatNow() // a command ended right after the first heartbeat
	waitFor(2)       // early, long before the minute; it fails
	waitFor(3)       // the retry; it succeeds
	time.Sleep(4 * minGap)
	mu.Lock()
	defer mu.Unlock()
	if len(beats) != 3 {
		t.Errorf("%d heartbeats, want 3: nothing forces one before the interval", len(beats))
	}
	if gap := beats[1].Sub(beats[0]); gap < minGap {
		t.Errorf("early heartbeat %s after the previous one, want at least %s", gap, minGap)
	}
	if gap := beats[2].Sub(beats[1]); gap < minGap {
		t.Errorf("retry %s after the failed heartbeat, want at least %s", gap, minGap)
	}
}
