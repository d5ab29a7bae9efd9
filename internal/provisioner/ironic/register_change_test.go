package ironic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// fakeRegistrationIronic answers for one registered node (a JSON object the test sets) the
// requests of a registration: GET, PATCH (applied, and refused as Ironic 39 refuses them: 409
// while a transition runs outside UPDATE_ALLOWED_STATES, and for interfaces outside enroll,
// manageable and available; as Ironic, only fields whose value differs are applied, and with
// reset_interfaces a new driver resets every interface not applied), the port lookup and
// provision state changes.
type fakeRegistrationIronic struct {
	mu       sync.Mutex
	node     map[string]any
	patches  []string // "query|op path=value ..." of each PATCH Ironic took
	refused  int      // PATCHes answered 409
	targets  []string
	reject   string // when set, every PATCH is answered 400 with this reason
	rejected int    // PATCHes answered 400
}

// resetDefault is the value the fake's reset_interfaces gives an interface it resets.
const resetDefault = "new-driver-default"

func (f *fakeRegistrationIronic) serve(t *testing.T) *Provisioner {
	t.Helper()
	uuid := f.node["uuid"].(string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.URL.Path == "/v1/" || r.URL.Path == "/v1":
			_, _ = fmt.Fprint(w, `{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": "1.1", "version": "1.115"}}`)
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(f.node)
		case r.URL.Path == "/v1/nodes/"+uuid && r.Method == http.MethodPatch:
			var ops []struct {
				Op    string
				Path  string
				Value any
			}
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &ops); err != nil {
				t.Errorf("PATCH body %s: %v", b, err)
			}
			if msg := f.refusal(ops); msg != "" {
				f.refused++
				w.WriteHeader(http.StatusConflict)
				_, _ = fmt.Fprintf(w, `{"error_message": "{\"faultstring\": %q}"}`, msg)
				return
			}
			if f.reject != "" {
				f.rejected++
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"error_message": "{\"faultstring\": %q}"}`, f.reject)
				return
			}
			var desc []string
			changed := map[string]bool{}
			for _, op := range ops {
				field := strings.TrimPrefix(op.Path, "/")
				desc = append(desc, fmt.Sprintf("%s %s=%v", op.Op, op.Path, op.Value))
				if strings.Contains(field, "/") || op.Op == "remove" {
					continue // keys inside driver_info: the test does not need them applied
				}
				// Ironic's API applies only the fields whose value differs (utils.py
				// patch_update_changed_fields); the others are not in the conductor's change set.
				if !reflect.DeepEqual(f.node[field], op.Value) {
					f.node[field] = op.Value
					changed[field] = true
				}
			}
			if r.URL.Query().Get("reset_interfaces") == "true" && changed["driver"] {
				// conductor/manager.py update_node: every interface outside the change set goes
				// back to the new driver's default.
				for field := range f.node {
					if strings.HasSuffix(field, "_interface") && !changed[field] {
						f.node[field] = resetDefault
					}
				}
			}
			slices.Sort(desc)
			f.patches = append(f.patches, r.URL.RawQuery+"|"+strings.Join(desc, " "))
			_ = json.NewEncoder(w).Encode(f.node)
		case r.URL.Path == "/v1/ports" && r.Method == http.MethodGet:
			_, _ = fmt.Fprintf(w, `{"ports": [{"uuid": "p1", "node_uuid": %q}]}`, uuid)
		case r.URL.Path == "/v1/nodes/"+uuid+"/states/provision" && r.Method == http.MethodPut:
			var body struct{ Target string }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			f.targets = append(f.targets, body.Target)
			w.WriteHeader(http.StatusAccepted)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.Endpoint = srv.URL + "/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refusal is Ironic 39's 409 for a PATCH of the node as it is, "" when it takes it.
func (f *fakeRegistrationIronic) refusal(ops []struct {
	Op    string
	Path  string
	Value any
}) string {
	st, _ := f.node["provision_state"].(string)
	tgt, _ := f.node["target_provision_state"].(string)
	allowed := map[string]bool{"deploy failed": true, "inspect wait": true, "inspect failed": true, "clean failed": true,
		"error": true, "verifying": true, "adopt failed": true, "service failed": true, "service hold": true}
	if tgt != "" && !allowed[st] {
		return "Node can not be updated while a state transition is in progress."
	}
	for _, op := range ops {
		if strings.HasSuffix(op.Path, "_interface") && st != "enroll" && st != "manageable" && st != "available" && st != "inspect wait" {
			return "Node can not have " + strings.TrimPrefix(op.Path, "/") + " updated unless it is in one of allowed states"
		}
	}
	return ""
}

func (f *fakeRegistrationIronic) set(fields map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.Copy(f.node, fields)
}

func (f *fakeRegistrationIronic) seen() (patches []string, refused int, targets []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.patches), f.refused, slices.Clone(f.targets)
}

// registeredNode is a node as Ironic shows it after enrolling a host with address, the password
// masked.
func registeredNode(t *testing.T, uuid, address string, fields map[string]any) map[string]any {
	t.Helper()
	a, err := bmc.Parse(address)
	if err != nil {
		t.Fatal(err)
	}
	info := a.DriverInfo("admin", "******", false)
	n := map[string]any{
		"uuid": uuid, "name": "ns~h", "provision_state": "manageable", "target_provision_state": nil, "power_state": "power off",
		"driver": a.Driver, "driver_info": info, "boot_interface": a.Interfaces.Boot, "raid_interface": a.Interfaces.RAID,
		"firmware_interface": "redfish", "inspect_interface": "agent", "bios_interface": "redfish", "management_interface": "redfish",
		"power_interface": "redfish", "vendor_interface": "redfish", "deploy_interface": "direct", "disable_power_off": false,
	}
	if a.Driver == bmc.DriverIPMI {
		n["firmware_interface"], n["bios_interface"], n["management_interface"] = "no-firmware", "no-bios", "ipmitool"
		n["power_interface"], n["vendor_interface"] = "ipmitool", "ipmitool"
	}
	maps.Copy(n, fields)
	return n
}

func registrationHost(uuid, address string) provisioner.Host {
	return provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: address, BootMACAddress: "52:54:00:00:00:01",
		BMCCredentials: provisioner.Credentials{Username: "admin", Password: "secret"}}
}

// TestRegisterBringsDriverAndInterfaces: the BMC address may change while a host registers (a typo
// fixed), and the new type may need another driver or boot interface. Register sets them with the
// BMC access: a driver change with reset_interfaces (the old driver's interfaces may not exist in
// the new one), the interfaces of the new type spelled out. Until then only driver_info changed:
// an IPMI node with redfish keys failed verification for ever, and a redfish:// node fixed to
// redfish-virtualmedia:// kept booting iPXE. Ironic drops from a PATCH the fields whose value is
// the current one, and the reset then gives them the new driver's default: those the node must
// keep (inspect_interface agent on both types, the provisioner's deploy_interface ramdisk) are
// set again in a second PATCH.
func TestRegisterBringsDriverAndInterfaces(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0101"
	const vmedia = "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1"
	for name, tc := range map[string]struct {
		old   string
		state map[string]any
		want  []string // substrings of the first PATCH
		after []string // of the second, "" for none
	}{
		"ipmi fixed to redfish virtual media, enroll": {
			old:   "ipmi://127.0.0.1:623",
			state: map[string]any{"provision_state": "enroll", "last_error": "Failed to get power state", "deploy_interface": deployRamdisk},
			want: []string{"reset_interfaces=true|", "replace /driver=redfish", "replace /boot_interface=redfish-virtual-media",
				"replace /raid_interface=redfish", "replace /firmware_interface=redfish", "replace /inspect_interface=agent",
				"replace /deploy_interface=ramdisk", "replace /driver_info="},
			after: []string{"|replace /deploy_interface=ramdisk replace /inspect_interface=agent"},
		},
		"redfish (iPXE) fixed to redfish virtual media, manageable": {
			old:  "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
			want: []string{"|replace /boot_interface=redfish-virtual-media"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeRegistrationIronic{node: registeredNode(t, uuid, tc.old, tc.state)}
			p := f.serve(t)
			res, _, err := p.Register(context.Background(), registrationHost(uuid, vmedia), provisioner.RegisterOptions{})
			if err != nil || res.Failed() {
				t.Fatalf("register: %s, %v", describe(res), err)
			}
			patches, _, _ := f.seen()
			if len(patches) == 0 {
				t.Fatal("nothing sent")
			}
			if len(patches) != 1+len(tc.after) {
				t.Errorf("PATCHes %q, want %d", patches, 1+len(tc.after))
			}
			for _, w := range tc.want {
				if !strings.Contains(patches[0], w) {
					t.Errorf("PATCH %q lacks %q", patches[0], w)
				}
			}
			for i, w := range tc.after {
				if 1+i >= len(patches) || patches[1+i] != w {
					t.Errorf("PATCH %d is missing or not %q", 2+i, w)
				}
			}
			a, _ := bmc.Parse(vmedia)
			f.mu.Lock()
			for field, w := range map[string]string{"driver": a.Driver, "boot_interface": a.Interfaces.Boot, "raid_interface": a.Interfaces.RAID,
				"inspect_interface": "agent", "firmware_interface": "redfish"} {
				if got := f.node[field]; got != w {
					t.Errorf("the node's %s is %v, want %s", field, got, w)
				}
			}
			if want, ok := tc.state["deploy_interface"]; ok && f.node["deploy_interface"] != want {
				t.Errorf("the node's deploy_interface is %v, want %v kept", f.node["deploy_interface"], want)
			}
			f.mu.Unlock()
			// Registered again with nothing new: the node now matches, nothing is sent.
			if _, _, err := p.Register(context.Background(), registrationHost(uuid, vmedia), provisioner.RegisterOptions{}); err != nil {
				t.Fatal(err)
			}
			if again, _, _ := f.seen(); len(again) != len(patches) {
				t.Errorf("a second registration sent %q", again[len(patches):])
			}
		})
	}
}

// TestRegisterRemovesNetworkData: network data removed from the host is removed from the node
// (Ironic writes the node's network_data into the agent ISOs it builds: the agent kept booting
// with the old static addresses); a node without any is left alone.
func TestRegisterRemovesNetworkData(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0102"
	const vmedia = "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1"
	f := &fakeRegistrationIronic{node: registeredNode(t, uuid, vmedia, map[string]any{
		"network_data": map[string]any{"links": []any{map[string]any{"id": "eth0", "type": "phy"}}}})}
	p := f.serve(t)
	if res, _, err := p.Register(context.Background(), registrationHost(uuid, vmedia), provisioner.RegisterOptions{}); err != nil || res.Failed() {
		t.Fatalf("register: %s, %v", describe(res), err)
	}
	patches, _, _ := f.seen()
	if len(patches) != 1 || !strings.Contains(patches[0], "remove /network_data") {
		t.Fatalf("PATCHes %q, want one removing network_data", patches)
	}
	f.mu.Lock()
	f.node["network_data"] = map[string]any{}
	f.mu.Unlock()
	if _, _, err := p.Register(context.Background(), registrationHost(uuid, vmedia), provisioner.RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := f.seen(); len(again) != 1 {
		t.Errorf("a node without network data got %q", again[1:])
	}
}

// TestRegisterDefersChangesInWaitStates: Ironic refuses a PATCH while the node waits for its agent
// (409 until the agent calls back, or Ironic's callback timeout). A registration change then (a
// credentials rotation, disablePowerOff, network data) must not hold the host: Register answers
// done without sending it, so the host's state handler runs (the lost-agent and image-change
// aborts with it), and the change goes to Ironic with the first read of the node in a state that
// takes it. Until then Register answered busy on every call until the wait ended.
func TestRegisterDefersChangesInWaitStates(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0102"
	const address = "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1"
	for _, wait := range []struct{ state, target string }{
		{"clean wait", "manageable"}, {"wait call-back", "active"}, {"service wait", "active"},
	} {
		t.Run(wait.state, func(t *testing.T) {
			f := &fakeRegistrationIronic{node: registeredNode(t, uuid, address,
				map[string]any{"provision_state": wait.state, "target_provision_state": wait.target})}
			p := f.serve(t)
			host := registrationHost(uuid, address)
			host.DisablePowerOff = true
			res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{CredentialsChanged: true})
			if err != nil || res.Busy || res.Failed() || !res.RegistrationDeferred {
				t.Fatalf("register while the node waits: %s (deferred %t), %v; want done, deferred", describe(res), res.RegistrationDeferred, err)
			}
			// Called again (the host recorded nothing): still owed, whether this process
			// remembers the change or a new one learns it again from the host.
			if res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{}); err != nil || res.Busy || !res.RegistrationDeferred {
				t.Fatalf("registered again while the node waits: %s (deferred %t), %v; want done, deferred", describe(res), res.RegistrationDeferred, err)
			}
			restarted := f.serve(t)
			if res, _, err := restarted.Register(context.Background(), host, provisioner.RegisterOptions{CredentialsChanged: true}); err != nil || res.Busy || !res.RegistrationDeferred {
				t.Fatalf("a new operator process while the node waits: %s (deferred %t), %v; want done, deferred", describe(res), res.RegistrationDeferred, err)
			}
			if patches, refused, _ := f.seen(); len(patches)+refused != 0 {
				t.Fatalf("PATCHes %q, %d refused; want none sent while Ironic refuses them", patches, refused)
			}
			if _, _, err := p.getNode(context.Background(), host); err != nil {
				t.Fatal(err)
			}
			if patches, refused, _ := f.seen(); len(patches)+refused != 0 {
				t.Fatalf("still waiting: PATCHes %q, %d refused; want none", patches, refused)
			}
			done := wait.target
			f.set(map[string]any{"provision_state": done, "target_provision_state": nil})
			p.watch.Forget(uuid) // the read of a moment ago would answer
			if _, _, err := p.getNode(context.Background(), host); err != nil {
				t.Fatal(err)
			}
			patches, _, _ := f.seen()
			if len(patches) != 1 || !strings.Contains(patches[0], "replace /disable_power_off=true") ||
				!strings.Contains(patches[0], "replace /driver_info=") {
				t.Fatalf("once %s: PATCHes %q; want one with disable_power_off and the new credentials", done, patches)
			}
			if _, _, err := p.getNode(context.Background(), host); err != nil {
				t.Fatal(err)
			}
			if again, _, _ := f.seen(); len(again) != 1 {
				t.Errorf("the deferred change was sent again: %q", again)
			}
			if res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{}); err != nil || res.Busy || res.RegistrationDeferred {
				t.Fatalf("registered once the change is in Ironic: %s (deferred %t), %v; want done, not deferred", describe(res), res.RegistrationDeferred, err)
			}
		})
	}
}

// TestRegisterDefersInterfacesWhileVerifying: Ironic takes driver_info in verifying but not the
// interfaces; the BMC access and the interfaces go together once verification ends (never the
// keys of one type on the interfaces of another).
func TestRegisterDefersInterfacesWhileVerifying(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0103"
	f := &fakeRegistrationIronic{node: registeredNode(t, uuid, "redfish+http://127.0.0.1:9/redfish/v1/Systems/1",
		map[string]any{"provision_state": "verifying", "target_provision_state": "manageable"})}
	p := f.serve(t)
	host := registrationHost(uuid, "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1")
	res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{})
	if err != nil || !res.Busy {
		t.Fatalf("register while verifying: %s, %v; want a wait", describe(res), err)
	}
	if patches, refused, _ := f.seen(); len(patches)+refused != 0 {
		t.Fatalf("PATCHes %q, %d refused while verifying; want none", patches, refused)
	}
	f.set(map[string]any{"provision_state": "enroll", "target_provision_state": nil, "last_error": "Failed to get power state"})
	if res, _, err = p.Register(context.Background(), host, provisioner.RegisterOptions{}); err != nil || res.Failed() {
		t.Fatalf("register after the verification failed: %s, %v", describe(res), err)
	}
	patches, _, targets := f.seen()
	if len(patches) != 1 || !strings.Contains(patches[0], "replace /boot_interface=redfish-virtual-media") ||
		!strings.Contains(patches[0], "replace /driver_info=") || !slices.Equal(targets, []string{"manage"}) {
		t.Fatalf("PATCHes %q, states %v; want the access and the boot interface in one PATCH, then manage", patches, targets)
	}
}

// TestRegisterAppliesAccessBeforeInterfaces: new credentials for an active node whose boot
// interface is not its BMC type's (Ironic changes interfaces only in enroll, manageable and
// available) go to Ironic at once, and the registration is not reported deferred; the interface
// follows once the node is available. Holding the credentials back with the interface would leave
// the old ones in Ironic for the node's life.
func TestRegisterAppliesAccessBeforeInterfaces(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0104"
	f := &fakeRegistrationIronic{node: registeredNode(t, uuid, "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
		map[string]any{"provision_state": "active"})}
	p := f.serve(t)
	host := registrationHost(uuid, "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1")
	res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{CredentialsChanged: true})
	// Done and not reported deferred: the credentials are in Ironic; the interface waiting alone
	// (maybe for months, until the node is deprovisioned) must not make the host register at
	// every reconcile.
	if err != nil || res.Busy || res.Failed() || res.RegistrationDeferred {
		t.Fatalf("register an active node: %s (deferred %t), %v; want done, not reported deferred", describe(res), res.RegistrationDeferred, err)
	}
	patches, refused, _ := f.seen()
	if len(patches) != 1 || refused != 0 || !strings.Contains(patches[0], "replace /driver_info=") || strings.Contains(patches[0], "boot_interface") {
		t.Fatalf("PATCHes %q, %d refused; want the credentials alone", patches, refused)
	}
	f.set(map[string]any{"provision_state": "available"})
	p.watch.Forget(uuid)
	if _, _, err := p.getNode(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if patches, _, _ = f.seen(); len(patches) != 2 || !strings.Contains(patches[1], "replace /boot_interface=redfish-virtual-media") {
		t.Fatalf("once available: PATCHes %q; want the boot interface", patches)
	}
}

// TestRefusedInterfaceChangeIsShown: an interface change Ironic refuses for the node's state (the
// decisions avoid them; this is a state they did not foresee) answers 409 like a locked node. It
// is retried, but the host is told what it waits for instead of nothing.
func TestRefusedInterfaceChangeIsShown(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0105"
	f := &fakeRegistrationIronic{node: registeredNode(t, uuid, "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1",
		map[string]any{"provision_state": "deploy failed", "target_provision_state": "active"})}
	p := f.serve(t)
	s, n, err := p.getNode(context.Background(), registrationHost(uuid, "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1"))
	if err != nil {
		t.Fatal(err)
	}
	var pt patch
	pt.setField("deploy_interface", deployRamdisk, n.DeployInterface)
	_, res, err, ok := p.update(context.Background(), s, n, pt)
	if ok || err != nil || !res.Busy || !strings.Contains(res.Waiting, "deploy_interface") || !strings.Contains(res.Waiting, `"deploy failed"`) {
		t.Errorf("update refused for the state: %s, waiting for %q, %v; want a wait naming the refusal", describe(res), res.Waiting, err)
	}
}

// TestDeferredDriverChangeWaitsForAStateThatTakesIt: a new driver deferred while the node waits
// (it goes with reset_interfaces, which Ironic takes only in enroll, manageable and available) is
// not tried in the states between (active, clean failed, error: Ironic updates the node there, but
// not its driver): no request, no log line per poll. Once available it is sent. A change Ironic
// then refuses for good (400) is not sent again on every poll: the host's next registration sends
// it and reports Ironic's refusal.
func TestDeferredDriverChangeWaitsForAStateThatTakesIt(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0106"
	const address = "redfish-virtualmedia+http://127.0.0.1:8000/redfish/v1/Systems/1"
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused %t", refuse), func(t *testing.T) {
			f := &fakeRegistrationIronic{node: registeredNode(t, uuid, "ipmi://127.0.0.1:623",
				map[string]any{"provision_state": "wait call-back", "target_provision_state": "active"})}
			p := f.serve(t)
			var mu sync.Mutex
			var lines []string
			p.log = funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, args)
			}, funcr.Options{Verbosity: 0})
			logged := func() []string {
				mu.Lock()
				defer mu.Unlock()
				out := slices.Clone(lines)
				lines = nil
				return out
			}
			host := registrationHost(uuid, address)
			res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{CredentialsChanged: true})
			if err != nil || res.Busy || !res.RegistrationDeferred {
				t.Fatalf("register while deploying: %s (deferred %t), %v; want done, deferred", describe(res), res.RegistrationDeferred, err)
			}
			logged()
			for _, st := range []map[string]any{
				{"provision_state": "active", "target_provision_state": nil},
				{"provision_state": "clean failed", "target_provision_state": "available"},
				{"provision_state": "error", "target_provision_state": nil},
			} {
				f.set(st)
				for range 2 {
					p.watch.Forget(uuid)
					if _, _, err := p.getNode(context.Background(), host); err != nil {
						t.Fatal(err)
					}
				}
				patches, refused, _ := f.seen()
				if lines := logged(); len(patches)+refused != 0 || len(lines) != 0 {
					t.Fatalf("%s: PATCHes %q, %d refused, log %q; want nothing tried", st["provision_state"], patches, refused, lines)
				}
				// Still owed: the host goes on calling Register, which still says so.
				if res, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{}); err != nil || !res.RegistrationDeferred {
					t.Fatalf("%s: register %s (deferred %t), %v; want deferred", st["provision_state"], describe(res), res.RegistrationDeferred, err)
				}
				logged()
			}
			f.set(map[string]any{"provision_state": "available", "target_provision_state": nil})
			if refuse {
				f.mu.Lock()
				f.reject = "Could not find the following interface in the 'ironic.hardware.interfaces.boot' entrypoint: redfish-virtual-media"
				f.mu.Unlock()
			}
			for range 3 {
				p.watch.Forget(uuid)
				if _, _, err := p.getNode(context.Background(), host); err != nil {
					t.Fatal(err)
				}
			}
			patches, _, _ := f.seen()
			f.mu.Lock()
			rejected := f.rejected
			f.mu.Unlock()
			if !refuse {
				if len(patches) == 0 || !strings.Contains(patches[0], "replace /driver=redfish") || rejected != 0 {
					t.Fatalf("once available: PATCHes %q; want the driver change", patches)
				}
				return
			}
			if len(patches) != 0 || rejected != 1 {
				t.Fatalf("refused once available: PATCHes %q, %d refused; want the change tried once", patches, rejected)
			}
			if lines := logged(); !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "Ironic refused the deferred registration change") }) {
				t.Errorf("log %q; want the refusal logged", lines)
			}
			res, _, err = p.Register(context.Background(), host, provisioner.RegisterOptions{})
			if err != nil || !res.Failed() || !strings.Contains(res.ErrorMessage, "redfish-virtual-media") ||
				!strings.Contains(res.ErrorMessage, "/driver") || strings.Contains(res.ErrorMessage, "secret") {
				t.Fatalf("the registration after the refusal: %s, %v; want the refusal reported", describe(res), err)
			}
		})
	}
}
