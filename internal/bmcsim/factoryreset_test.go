package bmcsim_test

import (
	"net/http"
	"testing"
)

// A factory reset through the control API undoes what a test did to a server (the Ironic tests'
// server pool relies on it) and keeps the life counters that other tests compare. Its event
// subscriptions go and are numbered from 1 again, as a real BMC's.
func TestFactoryResetRestoresAFreshServer(t *testing.T) {
	e := newEnv(t, envOptions{hosts: 1})
	bios := e.sys() + "/Bios"
	e.must(http.StatusNoContent, http.MethodPatch, bios+"/Settings", map[string]any{"Attributes": map[string]any{"ProcTurboMode": "Disabled"}})
	e.reset("On")
	e.must(http.StatusNoContent, http.MethodPatch, bios+"/Settings", map[string]any{"Attributes": map[string]any{"PowerOnDelaySeconds": 30}})
	r := e.must(http.StatusAccepted, http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
		map[string]any{"ImageURI": e.imageURL("/firmware/bios-2.1.0.bin")})
	task := str(r.body, "@odata.id")
	e.sim.Fleet.Quiesce() // downloaded, waiting for a reset
	subs := "/redfish/v1/EventService/Subscriptions"
	newSub := map[string]any{"Destination": "https://events.example.test/", "Context": "before"}
	first := str(e.must(http.StatusCreated, http.MethodPost, subs, newSub).body, "Id")
	e.must(http.StatusCreated, http.MethodPost, subs, newSub)
	equal(t, "ProcTurboMode before the factory reset", str(e.get(bios).body, "Attributes", "ProcTurboMode"), "Disabled")
	equal(t, "power before the factory reset", e.power(), "On")

	got := e.control(http.MethodPost, "/v1/servers/"+e.host.Name+"/factory-reset", nil)
	equal(t, "biosApplies kept", got.body["biosApplies"], 1.0)

	equal(t, "power after the factory reset", e.power(), "Off")
	equal(t, "ProcTurboMode after the factory reset", str(e.get(bios).body, "Attributes", "ProcTurboMode"), "Enabled")
	equal(t, "pending settings after the factory reset", len(e.get(bios + "/Settings").body["Attributes"].(map[string]any)), 0)
	equal(t, "the dropped update's task", e.get(task).body["TaskState"], "Exception")
	equal(t, "subscriptions after the factory reset", len(e.get(subs).body["Members"].([]any)), 0)
	equal(t, "the Id of the first subscription after the factory reset",
		str(e.must(http.StatusCreated, http.MethodPost, subs, map[string]any{"Destination": "https://other.example.test/"}).body, "Id"), first)

	// Nothing waits for the next boot any more: the dropped update and settings do not come back.
	e.reset("On")
	equal(t, "BiosVersion after a boot", str(e.get(e.sys()).body, "BiosVersion"), "1.0.0")
	equal(t, "PowerOnDelaySeconds after a boot", e.get(bios).body["Attributes"].(map[string]any)["PowerOnDelaySeconds"], 0.0)
	equal(t, "biosApplies after a boot with nothing pending", e.control(http.MethodGet, "/v1/servers/"+e.host.Name, nil).body["biosApplies"], 1.0)
}
