package redfish

import (
	"net/http"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// adapterID is the one network adapter holding the server's NICs; Ironic names its firmware
// component nic:<adapterID>.
const adapterID = "NIC.Slot.1"

func (svc *Service) chassisRoutes() {
	const ch = chassisPath + "/{ch}"
	svc.route("GET "+chassisPath, false, func(q *request) {
		q.json(http.StatusOK, collection(chassisPath, "#ChassisCollection.ChassisCollection", "Chassis Collection", []string{chassisOf(q.srv)}))
	})
	svc.route("GET "+ch, false, func(q *request) {
		if q.owns("ch") {
			q.json(http.StatusOK, svc.chassisBody(q.srv))
		}
	})
	svc.route("GET "+ch+"/NetworkAdapters", false, func(q *request) {
		if q.owns("ch") {
			q.json(http.StatusOK, collection(chassisOf(q.srv)+"/NetworkAdapters", "#NetworkAdapterCollection.NetworkAdapterCollection",
				"Network Adapter Collection", []string{chassisOf(q.srv) + "/NetworkAdapters/" + adapterID}))
		}
	})
	svc.route("GET "+ch+"/NetworkAdapters/{na}", false, func(q *request) {
		if !q.owns("ch") {
			return
		}
		if q.r.PathValue("na") != adapterID {
			q.notFound()
			return
		}
		q.json(http.StatusOK, svc.adapterBody(q.srv))
	})
}

func (svc *Service) chassisBody(s *server.Server) M {
	p := &svc.fleet.Config().Profile
	var power, led string
	s.View(func(st *server.State) { power, led = st.Power, st.IndicatorLED })
	return M{
		"@odata.id":       chassisOf(s),
		"@odata.type":     "#Chassis.v1_25_0.Chassis",
		"Id":              s.ID(),
		"Name":            "Computer System Chassis",
		"ChassisType":     "RackMount",
		"Manufacturer":    p.Manufacturer,
		"Model":           p.Model,
		"SerialNumber":    s.HW.Serial,
		"PartNumber":      "SIM-CHASSIS-1U",
		"PowerState":      power,
		"IndicatorLED":    led,
		"Status":          statusOK,
		"NetworkAdapters": ref(chassisOf(s) + "/NetworkAdapters"),
		"Links": M{
			"ComputerSystems": refs(sysPath(s)),
			"ManagedBy":       refs(managerPath(s)),
			"Storage":         refs(storagePath(s)),
		},
	}
}

func (svc *Service) adapterBody(s *server.Server) M {
	p := &svc.fleet.Config().Profile
	var fw string
	s.View(func(st *server.State) { fw = st.Firmware.NIC })
	vendor := "Sim Networks"
	if len(p.NICs) > 0 && p.NICs[0].Vendor != "" {
		vendor = p.NICs[0].Vendor
	}
	return M{
		"@odata.id":    chassisOf(s) + "/NetworkAdapters/" + adapterID,
		"@odata.type":  "#NetworkAdapter.v1_11_0.NetworkAdapter",
		"Id":           adapterID,
		"Name":         "Network Adapter",
		"Manufacturer": vendor,
		"Model":        "SimNIC 10G",
		"SerialNumber": s.HW.Serial + "N",
		"Status":       statusOK,
		"Controllers": []M{{
			"FirmwarePackageVersion": fw,
			"ControllerCapabilities": M{"NetworkPortCount": len(s.HW.NICs)},
		}},
	}
}
