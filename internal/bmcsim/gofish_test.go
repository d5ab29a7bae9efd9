package bmcsim_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// TestGofishWalksEveryResource walks a bmcsim server with a real Redfish client (gofish, session
// auth) through every resource and the actions Ironic uses, checking values against the server's
// configured hardware and the effect of each action.
func TestGofishWalksEveryResource(t *testing.T) {
	e := newEnv(t, envOptions{})
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: e.sim.BaseURL(), Username: e.host.Username, Password: e.host.Password})
	if err != nil {
		t.Fatalf("connecting with a session: %v", err)
	}
	svc := c.Service
	if svc.RedfishVersion == "" || svc.UUID == "" {
		t.Errorf("service root lacks RedfishVersion or UUID: %+v", svc)
	}

	t.Run("sessions", func(t *testing.T) {
		ss, err := svc.SessionService()
		must(t, err)
		sessions, err := ss.Sessions()
		must(t, err)
		if len(sessions) != 1 || sessions[0].UserName != e.host.Username {
			t.Fatalf("sessions = %+v, want the one gofish opened for %s", sessions, e.host.Username)
		}
	})

	systems, err := svc.Systems()
	must(t, err)
	if len(systems) != 1 || systems[0].ID != e.host.ID {
		t.Fatalf("systems = %d, want exactly %s (the authenticated server)", len(systems), e.host.ID)
	}
	sys := systems[0]

	t.Run("system", func(t *testing.T) {
		equal(t, "PowerState", sys.PowerState, schemas.OffPowerState)
		equal(t, "BiosVersion", sys.BiosVersion, "1.0.0")
		equal(t, "TotalSystemMemoryGiB", *sys.MemorySummary.TotalSystemMemoryGiB, 32)
		equal(t, "LogicalProcessorCount", *sys.ProcessorSummary.LogicalProcessorCount, 32)
		equal(t, "BootSourceOverrideMode", sys.Boot.BootSourceOverrideMode, schemas.UEFIBootSourceOverrideMode)
		if !slices.Contains(sys.Boot.AllowableBootSourceOverrideTargetValues, schemas.CdBootSource) {
			t.Errorf("allowed boot targets %v lack Cd", sys.Boot.AllowableBootSourceOverrideTargetValues)
		}
		must(t, sys.SetBoot(&schemas.Boot{BootSourceOverrideTarget: schemas.PxeBootSource, BootSourceOverrideEnabled: schemas.ContinuousBootSourceOverrideEnabled}))
		again, err := schemas.GetObject[schemas.ComputerSystem](c, sys.ODataID)
		must(t, err)
		equal(t, "BootSourceOverrideTarget after SetBoot", again.Boot.BootSourceOverrideTarget, schemas.PxeBootSource)
		equal(t, "BootSourceOverrideEnabled after SetBoot", again.Boot.BootSourceOverrideEnabled, schemas.ContinuousBootSourceOverrideEnabled)
	})

	t.Run("processors, memory, NICs", func(t *testing.T) {
		procs, err := sys.Processors()
		must(t, err)
		threads := 0
		for _, p := range procs {
			threads += *p.TotalThreads
		}
		equal(t, "processors", len(procs), 2)
		equal(t, "sum of TotalThreads", threads, 32)
		dimms, err := sys.Memory()
		must(t, err)
		equal(t, "DIMMs", len(dimms), 4)
		equal(t, "DIMM CapacityMiB", *dimms[0].CapacityMiB, 8192)
		nics, err := sys.EthernetInterfaces()
		must(t, err)
		equal(t, "NICs", len(nics), 2)
		macs := []string{nics[0].MACAddress, nics[1].MACAddress}
		if !slices.Contains(macs, e.host.BootMAC) || macs[0] == macs[1] {
			t.Errorf("NIC MACs %v: want distinct MACs including the boot MAC %s", macs, e.host.BootMAC)
		}
	})

	t.Run("storage and volumes", func(t *testing.T) {
		simple, err := sys.SimpleStorage()
		must(t, err)
		if len(simple) != 1 || len(simple[0].Devices) != 2 || *simple[0].Devices[0].CapacityBytes != 100<<30 {
			t.Fatalf("simple storage = %+v, want one controller with two 100 GiB devices", simple)
		}
		storage, err := sys.Storage()
		must(t, err)
		if len(storage) != 1 {
			t.Fatalf("storage = %d controllers, want 1", len(storage))
		}
		st := storage[0]
		if len(st.StorageControllers) != 1 || !slices.Contains(st.StorageControllers[0].SupportedRAIDTypes, schemas.RAID1RAIDType) {
			t.Errorf("StorageControllers = %+v, want one supporting RAID1", st.StorageControllers)
		}
		drives, err := st.Drives()
		must(t, err)
		if len(drives) != 2 || drives[0].SerialNumber == "" || drives[0].SerialNumber == drives[1].SerialNumber {
			t.Fatalf("drives = %+v, want two with distinct serials", drives)
		}
		vols, err := st.Volumes()
		must(t, err)
		equal(t, "volumes before create", len(vols), 0)
		resp, err := c.Post(st.ODataID+"/Volumes", map[string]any{
			"RAIDType": "RAID1", "CapacityBytes": 50 << 30,
			"Links": map[string]any{"Drives": []map[string]string{{"@odata.id": drives[0].ODataID}, {"@odata.id": drives[1].ODataID}}},
		})
		must(t, err)
		loc := resp.Header.Get("Location")
		resp.Body.Close()
		equal(t, "create status", resp.StatusCode, http.StatusCreated)
		vols, err = st.Volumes()
		must(t, err)
		if len(vols) != 1 || vols[0].RAIDType != schemas.RAID1RAIDType || *vols[0].CapacityBytes != 50<<30 || vols[0].ODataID != loc {
			t.Fatalf("volumes after create = %+v, want the RAID1 volume at %s", vols, loc)
		}
		resp, err = c.Delete(loc)
		must(t, err)
		resp.Body.Close()
		vols, err = st.Volumes()
		must(t, err)
		equal(t, "volumes after delete", len(vols), 0)
	})

	t.Run("bios settings apply on reset", func(t *testing.T) {
		bios, err := sys.Bios()
		must(t, err)
		equal(t, "ProcTurboMode", bios.Attributes["ProcTurboMode"], "Enabled")
		must(t, bios.UpdateBiosAttributesApplyAt(schemas.SettingsAttributes{"ProcTurboMode": "Disabled"}, schemas.OnResetSettingsApplyTime))
		bios, err = sys.Bios()
		must(t, err)
		equal(t, "ProcTurboMode before reset", bios.Attributes["ProcTurboMode"], "Enabled")
		_, err = sys.Reset(schemas.OnResetType)
		must(t, err)
		bios, err = sys.Bios()
		must(t, err)
		equal(t, "ProcTurboMode after reset", bios.Attributes["ProcTurboMode"], "Disabled")
	})

	t.Run("secure boot", func(t *testing.T) {
		sb, err := sys.SecureBoot()
		must(t, err)
		equal(t, "SecureBootEnable", sb.SecureBootEnable, false)
		sb.SecureBootEnable = true
		must(t, sb.Update())
		sb, err = sys.SecureBoot()
		must(t, err)
		equal(t, "SecureBootEnable after update", sb.SecureBootEnable, true)
	})

	managers, err := svc.Managers()
	must(t, err)
	if len(managers) != 1 || managers[0].FirmwareVersion != "1.00" {
		t.Fatalf("managers = %+v, want one with FirmwareVersion 1.00", managers)
	}

	t.Run("virtual media", func(t *testing.T) {
		media, err := managers[0].VirtualMedia()
		must(t, err)
		equal(t, "virtual media devices", len(media), 2)
		cd := media[slices.IndexFunc(media, func(m *schemas.VirtualMedia) bool { return slices.Contains(m.MediaTypes, schemas.CDVirtualMediaType) })]
		url := e.imageURL("/boot.iso")
		_, err = cd.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: url})
		must(t, err)
		cd, err = schemas.GetObject[schemas.VirtualMedia](c, cd.ODataID)
		must(t, err)
		if cd.Image != url || cd.Inserted == nil || !*cd.Inserted {
			t.Fatalf("after InsertMedia: Image %q Inserted %v, want %s inserted", cd.Image, cd.Inserted, url)
		}
		_, err = cd.EjectMedia()
		must(t, err)
		cd, err = schemas.GetObject[schemas.VirtualMedia](c, cd.ODataID)
		must(t, err)
		if cd.Image != "" || *cd.Inserted {
			t.Fatalf("after EjectMedia: Image %q Inserted %v, want empty", cd.Image, *cd.Inserted)
		}
		_, err = cd.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: e.imageURL("/not-an-iso.img")})
		if err == nil {
			t.Fatal("inserting a file that is not an ISO 9660 image succeeded")
		}
	})

	t.Run("firmware update and task", func(t *testing.T) {
		us, err := svc.UpdateService()
		must(t, err)
		inv, err := us.FirmwareInventory()
		must(t, err)
		versions := map[string]string{}
		for _, fw := range inv {
			versions[fw.ID] = fw.Version
		}
		if versions["BIOS"] != "1.0.0" || versions["BMC"] != "1.00" {
			t.Fatalf("firmware inventory = %v, want BIOS 1.0.0 and BMC 1.00", versions)
		}
		tm, err := us.SimpleUpdate(&schemas.UpdateServiceSimpleUpdateParameters{
			ImageURI: e.imageURL("/firmware/bmc-2.0.1.bin"), TransferProtocol: schemas.HTTPTransferProtocolType,
		})
		must(t, err)
		if tm == nil || tm.TaskMonitor == "" || tm.Task == nil || tm.Task.TaskState != schemas.RunningTaskState {
			t.Fatalf("SimpleUpdate task monitor = %+v, want a running task", tm)
		}
		e.sim.Fleet.Quiesce() // the BMC has downloaded the image
		resp, err := c.Get(tm.TaskMonitor)
		must(t, err)
		resp.Body.Close()
		equal(t, "task monitor status before the reset", resp.StatusCode, http.StatusAccepted)
		_, err = sys.Reset(schemas.ForceRestartResetType)
		must(t, err)
		task, err := schemas.GetObject[schemas.Task](c, tm.Task.ODataID)
		must(t, err)
		equal(t, "TaskState after the reset", task.TaskState, schemas.CompletedTaskState)
		mgr, err := schemas.GetObject[schemas.Manager](c, managers[0].ODataID)
		must(t, err)
		equal(t, "Manager FirmwareVersion", mgr.FirmwareVersion, "2.0.1")
		ts, err := svc.Tasks()
		must(t, err)
		tasks, err := ts.Tasks()
		must(t, err)
		equal(t, "tasks", len(tasks), 1)
	})

	t.Run("event subscriptions", func(t *testing.T) {
		es, err := svc.EventService()
		must(t, err)
		link, err := es.CreateEventSubscription("https://127.0.0.1:9/events", []schemas.EventType{schemas.AlertEventType}, nil, schemas.RedfishEventDestinationProtocol, "metal3", nil)
		must(t, err)
		subs, err := es.Subscriptions()
		must(t, err)
		if len(subs) != 1 || subs[0].Destination != "https://127.0.0.1:9/events" || subs[0].ODataID != link {
			t.Fatalf("subscriptions = %+v, want the one at %s", subs, link)
		}
		must(t, es.DeleteEventSubscription(link))
		subs, err = es.Subscriptions()
		must(t, err)
		equal(t, "subscriptions after delete", len(subs), 0)
	})

	t.Run("chassis and network adapters", func(t *testing.T) {
		chassis, err := svc.Chassis()
		must(t, err)
		if len(chassis) != 1 || chassis[0].ChassisType != schemas.RackMountChassisType {
			t.Fatalf("chassis = %+v, want one rack-mount chassis", chassis)
		}
		adapters, err := chassis[0].NetworkAdapters()
		must(t, err)
		if len(adapters) != 1 || len(adapters[0].Controllers) != 1 || adapters[0].Controllers[0].FirmwarePackageVersion != "20.5.13" {
			t.Fatalf("network adapters = %+v, want one with firmware 20.5.13", adapters)
		}
	})

	t.Run("bios attribute registry", func(t *testing.T) {
		regs, err := svc.Registries()
		must(t, err)
		if len(regs) != 1 || len(regs[0].Location) != 1 {
			t.Fatalf("registries = %+v, want the BIOS attribute registry file", regs)
		}
		bios, err := sys.Bios()
		must(t, err)
		equal(t, "registry name", regs[0].Registry, bios.AttributeRegistry)
		reg, err := schemas.GetObject[schemas.AttributeRegistry](c, regs[0].Location[0].URI)
		must(t, err)
		var names []string
		for _, a := range reg.RegistryEntries.Attributes {
			names = append(names, a.AttributeName)
		}
		for name := range bios.Attributes {
			if !slices.Contains(names, name) {
				t.Errorf("BIOS attribute %s is missing from the registry", name)
			}
		}
	})

	t.Run("logout deletes the session", func(t *testing.T) {
		c.Logout()
		r := e.get("/redfish/v1/SessionService/Sessions")
		equal(t, "sessions after logout", r.body["Members@odata.count"], 0)
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
