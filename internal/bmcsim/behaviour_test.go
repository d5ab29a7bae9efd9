package bmcsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

func TestResetSemantics(t *testing.T) {
	// Every server network-boots (Pxe, Continuous), so each boot starts an agent and each power-off
	// or reboot of a running server stops it: the runner's events show the power transitions.
	tests := map[string]struct {
		on        bool
		reset     string
		wantPower string
		want      []string
	}{
		"On powers on an off server":             {on: false, reset: "On", wantPower: "On", want: []string{"boot:net"}},
		"On leaves a running server alone":       {on: true, reset: "On", wantPower: "On"},
		"ForceOff powers off":                    {on: true, reset: "ForceOff", wantPower: "Off", want: []string{"stop"}},
		"ForceOff of an off server is a no-op":   {on: false, reset: "ForceOff", wantPower: "Off"},
		"GracefulShutdown powers off":            {on: true, reset: "GracefulShutdown", wantPower: "Off", want: []string{"stop"}},
		"ForceRestart reboots":                   {on: true, reset: "ForceRestart", wantPower: "On", want: []string{"stop", "boot:net"}},
		"GracefulRestart reboots":                {on: true, reset: "GracefulRestart", wantPower: "On", want: []string{"stop", "boot:net"}},
		"ForceRestart of an off server boots":    {on: false, reset: "ForceRestart", wantPower: "On", want: []string{"boot:net"}},
		"PushPowerButton turns an off server on": {on: false, reset: "PushPowerButton", wantPower: "On", want: []string{"boot:net"}},
		"PushPowerButton turns a server off":     {on: true, reset: "PushPowerButton", wantPower: "Off", want: []string{"stop"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{hosts: 1})
			e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}})
			if tc.on {
				e.reset("On")
			}
			e.runner.take()
			e.reset(tc.reset)
			equal(t, "PowerState", e.power(), tc.wantPower)
			equal(t, "runner events", e.runner.take(), tc.want)
		})
	}

	t.Run("unknown reset types are rejected", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		r := e.call(e.host, http.MethodPost, e.sys()+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "Nmi"}, nil)
		equal(t, "status", r.status, http.StatusBadRequest)
		equal(t, "error code", str(r.body, "error", "code"), "Base.1.18.ActionParameterNotSupported")
	})
}

func TestBootOverride(t *testing.T) {
	t.Run("Once reverts to Disabled after the boot it was used for", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		e.must(http.StatusNoContent, http.MethodPost, "/redfish/v1/Managers/"+e.host.ID+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", map[string]string{"Image": e.imageURL("/deploy.iso")})
		e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
		e.reset("On")
		equal(t, "events after the first boot", e.runner.take(), []string{"boot:iso" + itoa(len(e.iso))})
		boot := e.get(e.sys()).body["Boot"].(map[string]any)
		equal(t, "BootSourceOverrideEnabled after the boot", boot["BootSourceOverrideEnabled"], "Disabled")

		// The next reboot uses the boot order: the disk is blank, so the firmware goes on to the
		// virtual CD still inserted (Ironic's fast track reboots servers like this).
		e.reset("ForceRestart")
		equal(t, "events after a reboot without override, blank disk", e.runner.take(), []string{"stop", "boot:iso" + itoa(len(e.iso))})

		// With an image on the disk the boot order starts there: no agent.
		equal(t, "control API diskWrites before a write", e.control(http.MethodGet, "/v1/servers/"+e.host.Name, nil).body["diskWrites"], 0.0)
		e.sim.Fleet.ByName(e.host.Name).WriteDisk("http://images/disk.img")
		// Every write counts, the same image again too: a test compares the count with the
		// deployments it asked for.
		e.sim.Fleet.ByName(e.host.Name).WriteDisk("http://images/disk.img")
		equal(t, "control API diskWrites after two writes", e.control(http.MethodGet, "/v1/servers/"+e.host.Name, nil).body["diskWrites"], 2.0)
		e.reset("ForceRestart")
		equal(t, "events after a reboot without override, written disk", e.runner.take(), []string{"stop"})

		// sushy PATCHes only what differs: Enabled alone re-arms the override on the same target.
		e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"Boot": map[string]string{"BootSourceOverrideEnabled": "Once"}})
		e.reset("ForceRestart")
		equal(t, "events after re-arming Once", e.runner.take(), []string{"boot:iso" + itoa(len(e.iso))})
	})

	t.Run("a blank server without media or override boots nothing", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		cd := "/redfish/v1/Managers/" + e.host.ID + "/VirtualMedia/Cd/Actions/VirtualMedia."
		e.must(http.StatusNoContent, http.MethodPost, cd+"InsertMedia", map[string]string{"Image": e.imageURL("/deploy.iso")})
		e.must(http.StatusNoContent, http.MethodPost, cd+"EjectMedia", nil)
		e.reset("On")
		equal(t, "events after power on", e.runner.take(), []string(nil))
	})

	t.Run("a written disk boots without an agent", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}})
		e.reset("On")
		srv := e.sim.Fleet.ByName(e.host.Name)
		srv.WriteDisk("http://images/disk.img")
		srv.PowerOff() // standby.power_off
		e.sim.Fleet.Quiesce()
		equal(t, "PowerState after the agent powered off", e.power(), "Off")
		e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Hdd"}})
		e.runner.take()
		e.reset("On")
		equal(t, "events when booting the disk", e.runner.take(), []string(nil))
		equal(t, "booted", srv.Snapshot().Booted, "Hdd")
	})

	t.Run("invalid values are rejected", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		for _, boot := range []map[string]string{
			{"BootSourceOverrideTarget": "Floppy"},
			{"BootSourceOverrideEnabled": "Sometimes"},
			{"BootSourceOverrideMode": "Efi"},
			{"Bogus": "x"},
		} {
			r := e.call(e.host, http.MethodPatch, e.sys(), map[string]any{"Boot": boot}, nil)
			if r.status != http.StatusBadRequest {
				t.Errorf("PATCH Boot %v: status %d, want 400", boot, r.status)
			}
		}
		r := e.call(e.host, http.MethodPatch, e.sys(), map[string]any{"PowerState": "On"}, nil)
		equal(t, "PATCH of a read-only property", r.status, http.StatusBadRequest)
	})
}

func TestVirtualMedia(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	cd := "/redfish/v1/Managers/" + e.host.ID + "/VirtualMedia/Cd"
	insert := cd + "/Actions/VirtualMedia.InsertMedia"

	for name, image := range map[string]string{
		"not an ISO":   e.imageURL("/not-an-iso.img"),
		"missing file": e.imageURL("/missing.iso.gz"),
		"not http":     "nfs://server/deploy.iso",
	} {
		r := e.call(e.host, http.MethodPost, insert, map[string]string{"Image": image}, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("insert %s: status %d, want 400: %s", name, r.status, r.raw)
		}
	}
	if inserted := e.get(cd).body["Inserted"]; inserted != false {
		t.Fatalf("after failed inserts Inserted = %v, want false", inserted)
	}

	e.must(http.StatusNoContent, http.MethodPost, insert, map[string]string{"Image": e.imageURL("/deploy.iso")})
	r := e.get(cd)
	equal(t, "Inserted", r.body["Inserted"], true)
	equal(t, "Image", r.body["Image"], e.imageURL("/deploy.iso"))
	equal(t, "ConnectedVia", r.body["ConnectedVia"], "URI")
	equal(t, "image fetches on insert", e.fetches["/deploy.iso"], 1)

	e.must(http.StatusNoContent, http.MethodPost, cd+"/Actions/VirtualMedia.EjectMedia", nil)
	equal(t, "Inserted after eject", e.get(cd).body["Inserted"], false)

	// The PATCH fallback inserts and ejects too.
	e.must(http.StatusNoContent, http.MethodPatch, cd, map[string]any{"Image": e.imageURL("/deploy.iso"), "Inserted": true, "WriteProtected": true})
	equal(t, "Inserted after PATCH", e.get(cd).body["Inserted"], true)
	e.must(http.StatusNoContent, http.MethodPatch, cd, map[string]any{"Image": nil, "Inserted": false})
	r = e.get(cd)
	if r.body["Inserted"] != false || r.body["Image"] != nil {
		t.Errorf("after PATCH eject: Inserted %v Image %v, want false and null", r.body["Inserted"], r.body["Image"])
	}
}

func TestPendingBIOSSettingsApplyOnlyOnReset(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	bios := e.sys() + "/Bios"
	settingsURI := str(e.get(bios).body, "@Redfish.Settings", "SettingsObject", "@odata.id")
	equal(t, "SettingsObject", settingsURI, bios+"/Settings")

	e.must(http.StatusNoContent, http.MethodPatch, settingsURI, map[string]any{
		"Attributes":                 map[string]any{"ProcTurboMode": "Disabled", "PowerOnDelaySeconds": 30},
		"@Redfish.SettingsApplyTime": map[string]string{"ApplyTime": "OnReset"},
	})
	equal(t, "current ProcTurboMode before the reset", str(e.get(bios).body, "Attributes", "ProcTurboMode"), "Enabled")
	equal(t, "pending ProcTurboMode", str(e.get(settingsURI).body, "Attributes", "ProcTurboMode"), "Disabled")

	// Power transitions other than a boot do not apply them.
	e.reset("ForceOff")
	equal(t, "ProcTurboMode after a power-off", str(e.get(bios).body, "Attributes", "ProcTurboMode"), "Enabled")

	applies := func() any { return e.control(http.MethodGet, "/v1/servers/"+e.host.Name, nil).body["biosApplies"] }
	equal(t, "control API biosApplies before the boot", applies(), 0.0)
	e.reset("On")
	equal(t, "control API biosApplies after the boot", applies(), 1.0)
	attrs := e.get(bios).body["Attributes"].(map[string]any)
	equal(t, "ProcTurboMode after the boot", attrs["ProcTurboMode"], "Disabled")
	equal(t, "PowerOnDelaySeconds after the boot", attrs["PowerOnDelaySeconds"], float64(30))
	equal(t, "pending settings after the boot", len(e.get(settingsURI).body["Attributes"].(map[string]any)), 0)

	for name, body := range map[string]map[string]any{
		"unknown attribute":    {"Attributes": map[string]any{"NoSuchThing": "x"}},
		"value not in list":    {"Attributes": map[string]any{"ProcTurboMode": "Maybe"}},
		"read-only attribute":  {"Attributes": map[string]any{"SystemModelName": "x"}},
		"integer out of range": {"Attributes": map[string]any{"PowerOnDelaySeconds": 301}},
		"integer as a string":  {"Attributes": map[string]any{"PowerOnDelaySeconds": "30"}},
		"string as a number":   {"Attributes": map[string]any{"AssetTag": 1234}},
		"boolean as a string":  {"Attributes": map[string]any{"SerialConsole": "true"}},
		"enumeration number":   {"Attributes": map[string]any{"ProcTurboMode": 1}},
		"immediate apply time": {"Attributes": map[string]any{"ProcTurboMode": "Enabled"}, "@Redfish.SettingsApplyTime": map[string]string{"ApplyTime": "Immediate"}},
	} {
		if r := e.call(e.host, http.MethodPatch, settingsURI, body, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, r.status)
		}
	}

	e.must(http.StatusNoContent, http.MethodPost, bios+"/Actions/Bios.ResetBios", nil)
	e.reset("ForceRestart")
	equal(t, "ProcTurboMode after ResetBios and a reboot", str(e.get(bios).body, "Attributes", "ProcTurboMode"), "Enabled")
}

func TestFirmwareUpdateCompletesOnReset(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	update := "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"

	r := e.must(http.StatusAccepted, http.MethodPost, update, map[string]any{"ImageURI": e.imageURL("/firmware/bios-2.1.0.bin"), "TransferProtocol": "HTTP"})
	monitor := r.header.Get("Location")
	taskURI := str(r.body, "@odata.id")
	if !strings.HasPrefix(monitor, "/redfish/v1/TaskService/TaskMonitors/") || !strings.HasPrefix(taskURI, "/redfish/v1/TaskService/Tasks/") {
		t.Fatalf("Location %q, task %q: want a task monitor and a task", monitor, taskURI)
	}
	e.sim.Fleet.Quiesce() // downloaded
	equal(t, "firmware fetched", e.fetches["/firmware/bios-2.1.0.bin"], 1)
	for _, uri := range []string{monitor, taskURI} {
		r = e.get(uri)
		equal(t, uri+" status while waiting for a reset", r.status, http.StatusAccepted)
		// Staged, waiting for the reset that starts it (Ironic reboots a NIC's only then).
		equal(t, uri+" TaskState", r.body["TaskState"], "Starting")
	}
	equal(t, "BiosVersion before the reset", str(e.get(e.sys()).body, "BiosVersion"), "1.0.0")

	e.reset("On")
	r = e.get(taskURI)
	equal(t, "task status after the reset", r.status, http.StatusOK)
	equal(t, "TaskState", r.body["TaskState"], "Completed")
	equal(t, "TaskStatus", r.body["TaskStatus"], "OK")
	equal(t, "BiosVersion after the reset", str(e.get(e.sys()).body, "BiosVersion"), "2.1.0")
	equal(t, "inventory BIOS version", str(e.get("/redfish/v1/UpdateService/FirmwareInventory/BIOS").body, "Version"), "2.1.0")

	// A BMC update named by Targets, with the version in the query.
	r = e.must(http.StatusAccepted, http.MethodPost, update, map[string]any{
		"ImageURI": e.imageURL("/firmware/image.bin?version=3.5"), "Targets": []string{"/redfish/v1/UpdateService/FirmwareInventory/BMC"},
	})
	e.sim.Fleet.Quiesce()
	e.reset("ForceRestart")
	equal(t, "Manager FirmwareVersion", str(e.get("/redfish/v1/Managers/"+e.host.ID).body, "FirmwareVersion"), "3.5")
	equal(t, "BiosVersion unchanged by a BMC update", str(e.get(e.sys()).body, "BiosVersion"), "2.1.0")

	// Ironic reboots right after SimpleUpdate, usually before the BMC has the image: the update
	// then activates when the download ends, without waiting for another reset.
	r = e.must(http.StatusAccepted, http.MethodPost, update, map[string]any{"ImageURI": e.imageURL("/slow/bios-2.2.0.bin")})
	slowTask := str(r.body, "@odata.id")
	e.must(http.StatusNoContent, http.MethodPost, e.sys()+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "ForceRestart"})
	equal(t, "TaskState while downloading", e.get(slowTask).body["TaskState"], "Running")
	equal(t, "BiosVersion while downloading", str(e.get(e.sys()).body, "BiosVersion"), "2.1.0")
	e.releaseSlow()
	e.sim.Fleet.Quiesce()
	equal(t, "TaskState once downloaded after the reset", e.get(slowTask).body["TaskState"], "Completed")
	equal(t, "BiosVersion once downloaded after the reset", str(e.get(e.sys()).body, "BiosVersion"), "2.2.0")

	// An image the BMC cannot fetch fails the task without any reset.
	r = e.must(http.StatusAccepted, http.MethodPost, update, map[string]any{"ImageURI": e.imageURL("/nowhere/bios-9.bin")})
	e.sim.Fleet.Quiesce()
	r = e.get(str(r.body, "@odata.id"))
	equal(t, "TaskState of an unfetchable image", r.body["TaskState"], "Exception")
}

func TestBMCUpdateActivatesItself(t *testing.T) {
	// Ironic 39 does not reboot the host for a BMC update: it waits for Manager.FirmwareVersion to
	// change, as a real BMC flashes itself and restarts.
	e := newEnv(t, envOptions{hosts: 1, configure: func(c *config.Config) { c.BMCUpdateTime = config.Duration{Duration: time.Second} }})
	r := e.must(http.StatusAccepted, http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
		map[string]any{"ImageURI": e.imageURL("/firmware/bmc-7.1.bin")})
	task := str(r.body, "@odata.id")
	e.sim.Fleet.Quiesce()
	manager := "/redfish/v1/Managers/" + e.host.ID
	equal(t, "FirmwareVersion right after the download", str(e.get(manager).body, "FirmwareVersion"), "1.00")
	deadline := time.Now().Add(10 * time.Second)
	for str(e.get(manager).body, "FirmwareVersion") != "7.1" {
		if time.Now().After(deadline) {
			t.Fatalf("FirmwareVersion is still %s, want 7.1 without any reset", str(e.get(manager).body, "FirmwareVersion"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	equal(t, "TaskState", e.get(task).body["TaskState"], "Completed")
	equal(t, "PowerState (no reset)", e.power(), "Off")
}

func TestFaultInjection(t *testing.T) {
	t.Run("a share of calls answer 500", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		e.control(http.MethodPut, "/v1/faults", map[string]any{"errorRate": 1})
		r := e.get(e.sys())
		equal(t, "status", r.status, http.StatusInternalServerError)
		equal(t, "error code", str(r.body, "error", "code"), "Base.1.18.InternalError")
		e.control(http.MethodDelete, "/v1/faults", nil)
		equal(t, "status after clearing", e.get(e.sys()).status, http.StatusOK)

		e.control(http.MethodPut, "/v1/faults", map[string]any{"errorRate": 0.5})
		failed := 0
		for range 200 {
			if e.get(e.sys()).status == http.StatusInternalServerError {
				failed++
			}
		}
		if failed < 50 || failed > 150 {
			t.Errorf("%d of 200 calls failed at errorRate 0.5", failed)
		}
	})

	t.Run("per-server faults leave other servers alone", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		other := e.sim.Hosts()[1]
		e.control(http.MethodPut, "/v1/servers/"+other.Name+"/faults", map[string]any{"errorRate": 1})
		equal(t, "faulty server", e.call(other, http.MethodGet, other.SystemPath, nil, nil).status, http.StatusInternalServerError)
		equal(t, "healthy server", e.get(e.sys()).status, http.StatusOK)
	})

	t.Run("calls that never answer", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		e.control(http.MethodPut, "/v1/faults", map[string]any{"timeoutRate": 1})
		req, _ := http.NewRequest(http.MethodGet, e.sim.BaseURL()+e.sys(), nil)
		req.SetBasicAuth(e.host.Username, e.host.Password)
		client := &http.Client{Timeout: 300 * time.Millisecond}
		start := time.Now()
		_, err := client.Do(req)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("GET under timeoutRate 1: %v after %v, want a client timeout", err, time.Since(start))
		}
	})

	t.Run("wrong credentials", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		sess := e.must(http.StatusCreated, http.MethodPost, "/redfish/v1/SessionService/Sessions", map[string]string{"UserName": e.host.Username, "Password": e.host.Password})
		token := map[string]string{"X-Auth-Token": sess.header.Get("X-Auth-Token")}
		e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"wrongCredentials": true})
		equal(t, "basic auth with the real password", e.get(e.sys()).status, http.StatusUnauthorized)
		equal(t, "existing session", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, token).status, http.StatusUnauthorized)
		equal(t, "new session", e.call(bmcsim.Host{}, http.MethodPost, "/redfish/v1/SessionService/Sessions",
			map[string]string{"UserName": e.host.Username, "Password": e.host.Password}, nil).status, http.StatusUnauthorized)
		e.control(http.MethodDelete, "/v1/servers/"+e.host.Name+"/faults", nil)
		equal(t, "basic auth after clearing", e.get(e.sys()).status, http.StatusOK)
		equal(t, "session after clearing", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, token).status, http.StatusOK)
	})

	t.Run("a password changed on the BMC", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		sess := e.must(http.StatusCreated, http.MethodPost, "/redfish/v1/SessionService/Sessions", map[string]string{"UserName": e.host.Username, "Password": e.host.Password})
		token := map[string]string{"X-Auth-Token": sess.header.Get("X-Auth-Token")}
		changed := e.host
		changed.Password = "changed-on-the-bmc"
		e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"password": changed.Password})
		equal(t, "basic auth with the old password", e.get(e.sys()).status, http.StatusUnauthorized)
		equal(t, "session opened with the old password", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, token).status, http.StatusUnauthorized)
		equal(t, "basic auth with the new password", e.call(changed, http.MethodGet, e.sys(), nil, nil).status, http.StatusOK)
		newSess := e.call(bmcsim.Host{}, http.MethodPost, "/redfish/v1/SessionService/Sessions",
			map[string]string{"UserName": e.host.Username, "Password": changed.Password}, nil)
		equal(t, "new session with the new password", newSess.status, http.StatusCreated)
		newToken := map[string]string{"X-Auth-Token": newSess.header.Get("X-Auth-Token")}
		equal(t, "session opened with the new password", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, newToken).status, http.StatusOK)
		e.control(http.MethodDelete, "/v1/servers/"+e.host.Name+"/faults", nil)
		equal(t, "the old password once cleared", e.get(e.sys()).status, http.StatusOK)
		equal(t, "the new password once cleared", e.call(changed, http.MethodGet, e.sys(), nil, nil).status, http.StatusUnauthorized)
		equal(t, "session of the new password once cleared", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, newToken).status, http.StatusUnauthorized)
	})

	t.Run("a power-on that does not happen", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}})
		e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"ignorePowerOn": true})
		e.reset("On")
		equal(t, "PowerState after an ignored power-on", e.power(), "Off")
		equal(t, "agent boots", e.runner.take(), []string(nil))
		e.control(http.MethodDelete, "/v1/faults", nil)
		e.reset("On")
		equal(t, "PowerState once cleared", e.power(), "On")
	})

	t.Run("a power-on that fails", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"failPowerOn": true})
		e.must(http.StatusInternalServerError, http.MethodPost, e.sys()+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
		equal(t, "PowerState after a failed power-on", e.power(), "Off")
		e.control(http.MethodDelete, "/v1/faults", nil)
		e.reset("On")
		e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"failPowerOn": true})
		e.must(http.StatusInternalServerError, http.MethodPost, e.sys()+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "ForceRestart"})
		equal(t, "PowerState after a failed restart", e.power(), "On")
		e.reset("ForceOff")
		equal(t, "PowerState after a power-off (not refused)", e.power(), "Off")
	})

	t.Run("a firmware update that fails", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		e.control(http.MethodPut, "/v1/faults", map[string]any{"failFirmwareUpdate": true})
		r := e.must(http.StatusAccepted, http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
			map[string]any{"ImageURI": e.imageURL("/firmware/bios-2.0.0.bin")})
		e.sim.Fleet.Quiesce()
		e.reset("On")
		task := e.get(str(r.body, "@odata.id"))
		equal(t, "TaskState", task.body["TaskState"], "Exception")
		equal(t, "TaskStatus", task.body["TaskStatus"], "Critical")
		equal(t, "BiosVersion", str(e.get(e.sys()).body, "BiosVersion"), "1.0.0")
	})

	t.Run("a BIOS setting the BMC rejects", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		settings := e.sys() + "/Bios/Settings"
		e.control(http.MethodPut, "/v1/servers/"+e.host.Name+"/faults", map[string]any{"rejectBIOSSetting": "ProcTurboMode"})
		r := e.call(e.host, http.MethodPatch, settings, map[string]any{"Attributes": map[string]any{"ProcTurboMode": "Disabled", "NumLock": "Off"}}, nil)
		equal(t, "PATCH with the rejected setting", r.status, http.StatusBadRequest)
		equal(t, "nothing of it pending", len(e.get(settings).body["Attributes"].(map[string]any)), 0)
		e.must(http.StatusNoContent, http.MethodPatch, settings, map[string]any{"Attributes": map[string]any{"NumLock": "Off"}})
		e.control(http.MethodDelete, "/v1/faults", nil)
		e.must(http.StatusNoContent, http.MethodPatch, settings, map[string]any{"Attributes": map[string]any{"ProcTurboMode": "Disabled"}})
	})

	t.Run("an agent that crashes mid-deploy", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		srv := e.sim.Fleet.ByName(e.host.Name)
		other := e.sim.Fleet.ByName(e.sim.Hosts()[1].Name)
		equal(t, "FailDeploy before", srv.FailDeploy(), false)
		e.control(http.MethodPut, "/v1/servers/"+e.host.ID+"/faults", map[string]any{"failDeploy": true})
		equal(t, "FailDeploy of the faulty server", srv.FailDeploy(), true)
		equal(t, "FailDeploy of another server", other.FailDeploy(), false)
	})

	t.Run("invalid faults are rejected", func(t *testing.T) {
		e := newEnv(t, envOptions{hosts: 1})
		for _, body := range []string{`{"errorRate": 2}`, `{"errorRate": 0.7, "timeoutRate": 0.7}`, `{"bogus": true}`} {
			req, _ := http.NewRequest(http.MethodPut, e.sim.ControlURL()+"/v1/faults", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			equal(t, "PUT "+body, resp.StatusCode, http.StatusBadRequest)
		}
	})
}

func TestETagIfMatch(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	r := e.get(e.sys())
	etag := r.header.Get("ETag")
	if !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("ETag %q is not a weak entity tag", etag)
	}
	equal(t, "same ETag on an unchanged resource", e.get(e.sys()).header.Get("ETag"), etag)

	patch := map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Pxe"}}
	r = e.call(e.host, http.MethodPatch, e.sys(), patch, map[string]string{"If-Match": `W/"0000"`})
	equal(t, "PATCH with a stale ETag", r.status, http.StatusPreconditionFailed)
	equal(t, "error code", str(r.body, "error", "code"), "Base.1.18.PreconditionFailed")
	equal(t, "PATCH with the current ETag", e.call(e.host, http.MethodPatch, e.sys(), patch, map[string]string{"If-Match": etag}).status, http.StatusNoContent)
	newTag := e.get(e.sys()).header.Get("ETag")
	if newTag == etag {
		t.Fatal("the ETag did not change with the resource")
	}
	equal(t, "PATCH with the old ETag", e.call(e.host, http.MethodPatch, e.sys(), patch, map[string]string{"If-Match": etag}).status, http.StatusPreconditionFailed)
	equal(t, "PATCH with If-Match *", e.call(e.host, http.MethodPatch, e.sys(), patch, map[string]string{"If-Match": "*"}).status, http.StatusNoContent)
	equal(t, "PATCH with the strong form of the tag", e.call(e.host, http.MethodPatch, e.sys(), patch, map[string]string{"If-Match": strings.TrimPrefix(newTag, "W/")}).status, http.StatusNoContent)
	equal(t, "GET with If-None-Match", e.call(e.host, http.MethodGet, e.sys(), nil, map[string]string{"If-None-Match": newTag}).status, http.StatusNotModified)

	settings := e.sys() + "/Bios/Settings"
	r = e.call(e.host, http.MethodPatch, settings, map[string]any{"Attributes": map[string]any{"NumLock": "Off"}}, map[string]string{"If-Match": `"stale"`})
	equal(t, "Bios/Settings PATCH with a stale ETag", r.status, http.StatusPreconditionFailed)
}

func TestAuthenticationAndScoping(t *testing.T) {
	e := newEnv(t, envOptions{})
	other := e.sim.Hosts()[1]

	equal(t, "service root without credentials", e.call(bmcsim.Host{}, http.MethodGet, "/redfish/v1/", nil, nil).status, http.StatusOK)
	r := e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, nil)
	equal(t, "system without credentials", r.status, http.StatusUnauthorized)
	if r.header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	bad := e.host
	bad.Password = "wrong"
	equal(t, "wrong password", e.call(bad, http.MethodGet, e.sys(), nil, nil).status, http.StatusUnauthorized)
	equal(t, "another server's system", e.call(e.host, http.MethodGet, other.SystemPath, nil, nil).status, http.StatusNotFound)
	r = e.get("/redfish/v1/Systems")
	equal(t, "systems listed", r.body["Members@odata.count"], 1)

	r = e.must(http.StatusCreated, http.MethodPost, "/redfish/v1/SessionService/Sessions", map[string]string{"UserName": e.host.Username, "Password": e.host.Password})
	token, loc := r.header.Get("X-Auth-Token"), r.header.Get("Location")
	if token == "" || !strings.HasPrefix(loc, "/redfish/v1/SessionService/Sessions/") {
		t.Fatalf("session answer: token %q Location %q", token, loc)
	}
	hdr := map[string]string{"X-Auth-Token": token}
	equal(t, "GET with the token", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, hdr).status, http.StatusOK)
	equal(t, "DELETE the session", e.call(bmcsim.Host{}, http.MethodDelete, loc, nil, hdr).status, http.StatusNoContent)
	equal(t, "GET with the deleted token", e.call(bmcsim.Host{}, http.MethodGet, e.sys(), nil, hdr).status, http.StatusUnauthorized)
	equal(t, "session with a wrong password", e.call(bmcsim.Host{}, http.MethodPost, "/redfish/v1/SessionService/Sessions",
		map[string]string{"UserName": e.host.Username, "Password": "nope"}, nil).status, http.StatusUnauthorized)

	r = e.get("/redfish/v1/NoSuchThing")
	equal(t, "unknown path", r.status, http.StatusNotFound)
	equal(t, "unknown path error", str(r.body, "error", "code"), "Base.1.18.ResourceNotFound")
	equal(t, "wrong method", e.call(e.host, http.MethodDelete, e.sys(), nil, nil).status, http.StatusMethodNotAllowed)
}

func TestVolumes(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	storage := e.sys() + "/Storage/1"
	drives := func(ids ...string) map[string]any {
		var l []map[string]string
		for _, id := range ids {
			l = append(l, map[string]string{"@odata.id": storage + "/Drives/" + id})
		}
		return map[string]any{"Drives": l}
	}
	r := e.must(http.StatusCreated, http.MethodPost, storage+"/Volumes", map[string]any{"RAIDType": "RAID1", "Links": drives("Disk0", "Disk1")})
	vol := r.header.Get("Location")
	equal(t, "RAID1 capacity defaults to one drive", r.body["CapacityBytes"], float64(100<<30))
	equal(t, "drive in use", e.call(e.host, http.MethodPost, storage+"/Volumes", map[string]any{"RAIDType": "RAID0", "Links": drives("Disk0")}, nil).status, http.StatusConflict)
	for name, body := range map[string]map[string]any{
		"too few drives":    {"RAIDType": "RAID5", "Links": drives("Disk0", "Disk1")},
		"too large":         {"RAIDType": "RAID0", "CapacityBytes": 500 << 30, "Links": drives("Disk0")},
		"unknown drive":     {"RAIDType": "RAID0", "Links": drives("Disk9")},
		"unknown RAID type": {"RAIDType": "RAID7", "Links": drives("Disk0")},
	} {
		if r := e.call(e.host, http.MethodPost, storage+"/Volumes", body, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, r.status)
		}
	}
	inv := e.sim.Fleet.ByName(e.host.Name).Inventory()
	if len(inv.Disks) != 1 || inv.Disks[0].Size != 100<<30 {
		t.Errorf("agent inventory disks = %+v, want the one RAID1 volume", inv.Disks)
	}
	e.must(http.StatusNoContent, http.MethodDelete, vol, nil)
	equal(t, "volumes after delete", e.get(storage + "/Volumes").body["Members@odata.count"], 0)

	// OnReset: a task now, the volume after the next boot.
	r = e.must(http.StatusAccepted, http.MethodPost, storage+"/Volumes", map[string]any{"RAIDType": "RAID0", "Links": drives("Disk0"), "@Redfish.OperationApplyTime": "OnReset"})
	task := str(r.body, "@odata.id")
	equal(t, "volumes before the reset", e.get(storage + "/Volumes").body["Members@odata.count"], 0)
	e.reset("On")
	equal(t, "volumes after the reset", e.get(storage + "/Volumes").body["Members@odata.count"], 1)
	equal(t, "task", e.get(task).body["TaskState"], "Completed")
}

func TestPersistenceAcrossRestart(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{hosts: 2, state: state})
	sys, mgr := e.sys(), "/redfish/v1/Managers/"+e.host.ID
	e.must(http.StatusNoContent, http.MethodPost, mgr+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", map[string]string{"Image": e.imageURL("/deploy.iso")})
	e.must(http.StatusNoContent, http.MethodPatch, sys, map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideMode": "Legacy"}})
	e.must(http.StatusNoContent, http.MethodPatch, sys+"/Bios/Settings", map[string]any{"Attributes": map[string]any{"SriovGlobalEnable": "Enabled"}})
	e.must(http.StatusAccepted, http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", map[string]any{"ImageURI": e.imageURL("/firmware/bmc-4.2.bin")})
	e.must(http.StatusCreated, http.MethodPost, sys+"/Storage/1/Volumes", map[string]any{"RAIDType": "RAID0", "Links": map[string]any{"Drives": []map[string]string{{"@odata.id": sys + "/Storage/1/Drives/Disk1"}}}})
	e.sim.Fleet.Quiesce()
	e.reset("On")
	e.sim.Fleet.ByName(e.host.Name).WriteDisk("http://images/os.img")
	e.must(http.StatusNoContent, http.MethodPatch, sys+"/Bios/Settings", map[string]any{"Attributes": map[string]any{"NumLock": "Off"}})
	before := e.sim.Fleet.ByName(e.host.Name).Snapshot()
	equal(t, "booted before the restart", before.Booted, "Cd")
	e.runner.take()

	e.stop()
	equal(t, "runner events at shutdown", e.runner.take(), []string{"stop"})
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("state file after shutdown: %v", err)
	}
	e.start(testConfig(2), envOptions{state: state})
	e.sim.Fleet.Quiesce()
	// The host kept running the agent while its BMC restarted.
	equal(t, "runner events after the restart", e.runner.take(), []string{"boot:iso" + itoa(len(e.iso))})

	after := e.sim.Fleet.ByName(e.host.Name).Snapshot()
	a, _ := json.Marshal(after)
	b, _ := json.Marshal(before)
	if string(a) != string(b) {
		t.Errorf("state after restart differs:\n got %s\nwant %s", a, b)
	}
	r := e.get(sys)
	equal(t, "PowerState", r.body["PowerState"], "On")
	equal(t, "boot mode", str(r.body, "Boot", "BootSourceOverrideMode"), "Legacy")
	equal(t, "BMC firmware", str(e.get(mgr).body, "FirmwareVersion"), "4.2")
	equal(t, "BIOS attribute", str(e.get(sys+"/Bios").body, "Attributes", "SriovGlobalEnable"), "Enabled")
	equal(t, "pending BIOS attribute", str(e.get(sys+"/Bios/Settings").body, "Attributes", "NumLock"), "Off")
	equal(t, "media", e.get(mgr + "/VirtualMedia/Cd").body["Image"], e.imageURL("/deploy.iso"))
	equal(t, "volumes", e.get(sys + "/Storage/1/Volumes").body["Members@odata.count"], 1)
	equal(t, "disk image", after.DiskImage, "http://images/os.img")
	// The password is derived from the secret, so clients keep working across restarts.
	equal(t, "credentials", e.sim.Hosts()[0].Password, e.host.Password)
}

func TestInventoryAndAddresses(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 3, tls: true})
	path := filepath.Join(t.TempDir(), "inventory.json")
	must(t, e.sim.WriteInventory(path))
	data, err := os.ReadFile(path)
	must(t, err)
	var inv []bmcsim.InventoryEntry
	must(t, json.Unmarshal(data, &inv))
	equal(t, "entries", len(inv), 3)
	macs := map[string]bool{}
	for i, h := range e.sim.Hosts() {
		want := "redfish-virtualmedia://" + strings.TrimPrefix(e.sim.BaseURL(), "https://") + "/redfish/v1/Systems/" + h.ID
		equal(t, "bmcAddress", inv[i].BMCAddress, want)
		equal(t, "username", inv[i].Username, h.Name)
		if _, err := net.ParseMAC(inv[i].BootMACAddress); err != nil || macs[inv[i].BootMACAddress] {
			t.Errorf("bootMACAddress %q is invalid or not unique", inv[i].BootMACAddress)
		}
		macs[inv[i].BootMACAddress] = true
		for _, scheme := range bmcsim.Schemes {
			if !strings.HasPrefix(h.Addresses[scheme], scheme+"://") || !strings.HasSuffix(h.Addresses[scheme], h.SystemPath) {
				t.Errorf("address %s = %q", scheme, h.Addresses[scheme])
			}
		}
	}
	// Over TLS with the self-signed certificate.
	equal(t, "GET over HTTPS", e.get(e.sys()).status, http.StatusOK)
	if len(e.sim.CertPEM()) == 0 {
		t.Error("no certificate PEM with TLS")
	}

	// MACs and ids are deterministic: a second simulator gives the same ones.
	sim2, err := bmcsim.Start(bmcsim.Options{Config: testConfig(3)})
	must(t, err)
	defer sim2.Close(context.Background())
	for i, h := range sim2.Hosts() {
		equal(t, "same boot MAC", h.BootMAC, inv[i].BootMACAddress)
		equal(t, "same system id", h.ID, e.sim.Hosts()[i].ID)
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bmcsim.yaml")
	must(t, os.WriteFile(file, []byte(`
hosts: 3
namePrefix: rack1-
bootTime: 5s
redfishLatency: 10ms
profile:
  cpu: {sockets: 1, coresPerSocket: 4, threadsPerCore: 2, model: Tiny, speedMHz: 2000, arch: x86_64}
  disks:
  - {name: Disk0, sizeGiB: 480, mediaType: SSD, protocol: SATA, model: M, vendor: V, serialPrefix: S}
  nics:
  - {name: NIC1, speedMbps: 25000}
  macPrefix: "02:00:5e"
faults:
  errorRate: 0.25
`), 0o600))
	cfg, err := config.Load(file)
	must(t, err)
	must(t, cfg.Validate())
	equal(t, "hosts", cfg.Hosts, 3)
	equal(t, "bootTime", cfg.BootTime.Duration, 5*time.Second)
	equal(t, "latency", cfg.RedfishLatency.Duration, 10*time.Millisecond)
	equal(t, "memory kept from defaults", cfg.Profile.Memory.DIMMs, 4)
	equal(t, "fault", cfg.Faults.ErrorRate, 0.25)
	f, err := server.New(cfg, server.Options{})
	must(t, err)
	s := f.ByName("rack1-2")
	if s == nil {
		t.Fatal("no server rack1-2")
	}
	equal(t, "MAC", s.BootMAC(), "02:00:5e:00:02:00")
	inv := s.Inventory()
	equal(t, "inventory CPU count", inv.CPU.Count, 8)
	equal(t, "inventory disk size", inv.Disks[0].Size, int64(480)<<30)

	must(t, os.WriteFile(file, []byte("hosts: 2\nprofile: {nics: []}\nbogus: 1\n"), 0o600))
	if _, err := config.Load(file); err == nil {
		t.Error("a config with an unknown field loaded")
	}
	bad := config.Default()
	bad.Profile.NICs = nil
	bad.Profile.Disks[0].Protocol = "IDE"
	err = bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "profile.nics") || !strings.Contains(err.Error(), "profile.disks[0].protocol") {
		t.Errorf("Validate = %v, want errors naming profile.nics and profile.disks[0].protocol", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestRedfishLatency(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1, configure: func(c *config.Config) { c.RedfishLatency = config.Duration{Duration: 150 * time.Millisecond} }})
	start := time.Now()
	equal(t, "status", e.get(e.sys()).status, http.StatusOK)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("GET took %v with a configured latency of 150ms", d)
	}
}
