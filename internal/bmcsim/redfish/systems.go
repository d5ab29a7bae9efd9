package redfish

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

func (svc *Service) systemRoutes() {
	const sys = systemsPath + "/{sys}"
	svc.route("GET "+systemsPath, false, func(q *request) {
		q.json(http.StatusOK, collection(systemsPath, "#ComputerSystemCollection.ComputerSystemCollection",
			"Computer System Collection", []string{sysPath(q.srv)}))
	})
	svc.route("GET "+sys, false, func(q *request) {
		if q.owns("sys") {
			q.json(http.StatusOK, svc.systemBody(q.srv))
		}
	})
	svc.route("PATCH "+sys, false, svc.patchSystem)
	svc.route("POST "+sys+"/Actions/ComputerSystem.Reset", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var body struct{ ResetType string }
		if !q.decode(&body, true) {
			return
		}
		if body.ResetType == "" {
			q.error(http.StatusBadRequest, "ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.", "ComputerSystem.Reset", "ResetType")
			return
		}
		if !slices.Contains(server.ResetTypes, body.ResetType) {
			q.error(http.StatusBadRequest, "ActionParameterNotSupported", "The parameter ResetType value "+body.ResetType+" is not supported by the action ComputerSystem.Reset.", body.ResetType, "ComputerSystem.Reset")
			return
		}
		if err := q.srv.Reset(body.ResetType); err != nil {
			q.fail(err)
			return
		}
		q.noContent()
	})
	svc.route("GET "+sys+"/Processors", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var members []string
		for _, p := range q.srv.HW.Processors {
			members = append(members, sysPath(q.srv)+"/Processors/"+p.ID)
		}
		q.json(http.StatusOK, collection(sysPath(q.srv)+"/Processors", "#ProcessorCollection.ProcessorCollection", "Processors Collection", members))
	})
	svc.route("GET "+sys+"/Processors/{id}", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		i := slices.IndexFunc(q.srv.HW.Processors, func(p server.Processor) bool { return p.ID == q.r.PathValue("id") })
		if i < 0 {
			q.notFound()
			return
		}
		p := q.srv.HW.Processors[i]
		arch, isa := "x86", "x86-64"
		if p.Arch == "aarch64" {
			arch, isa = "ARM", "ARM-A64"
		}
		q.json(http.StatusOK, M{
			"@odata.id":             sysPath(q.srv) + "/Processors/" + p.ID,
			"@odata.type":           "#Processor.v1_20_0.Processor",
			"Id":                    p.ID,
			"Name":                  "Processor",
			"Socket":                p.Socket,
			"ProcessorType":         "CPU",
			"ProcessorArchitecture": arch,
			"InstructionSet":        isa,
			"Manufacturer":          p.Manufacturer,
			"Model":                 p.Model,
			"MaxSpeedMHz":           p.SpeedMHz,
			"OperatingSpeedMHz":     p.SpeedMHz,
			"TotalCores":            p.Cores,
			"TotalEnabledCores":     p.Cores,
			"TotalThreads":          p.Threads,
			"Status":                statusOK,
		})
	})
	svc.route("GET "+sys+"/Memory", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var members []string
		for _, d := range q.srv.HW.DIMMs {
			members = append(members, sysPath(q.srv)+"/Memory/"+d.ID)
		}
		q.json(http.StatusOK, collection(sysPath(q.srv)+"/Memory", "#MemoryCollection.MemoryCollection", "Memory Module Collection", members))
	})
	svc.route("GET "+sys+"/Memory/{id}", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		i := slices.IndexFunc(q.srv.HW.DIMMs, func(d server.DIMM) bool { return d.ID == q.r.PathValue("id") })
		if i < 0 {
			q.notFound()
			return
		}
		d := q.srv.HW.DIMMs[i]
		q.json(http.StatusOK, M{
			"@odata.id":         sysPath(q.srv) + "/Memory/" + d.ID,
			"@odata.type":       "#Memory.v1_20_0.Memory",
			"Id":                d.ID,
			"Name":              "Memory " + d.ID,
			"CapacityMiB":       d.SizeMiB,
			"MemoryDeviceType":  d.Type,
			"MemoryType":        "DRAM",
			"OperatingSpeedMhz": d.SpeedMHz,
			"Manufacturer":      "SimMem",
			"SerialNumber":      d.Serial,
			"DeviceLocator":     d.ID,
			"Status":            statusOK,
		})
	})
	svc.route("GET "+sys+"/EthernetInterfaces", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var members []string
		for _, n := range q.srv.HW.NICs {
			members = append(members, sysPath(q.srv)+"/EthernetInterfaces/"+n.ID)
		}
		q.json(http.StatusOK, collection(sysPath(q.srv)+"/EthernetInterfaces", "#EthernetInterfaceCollection.EthernetInterfaceCollection", "Ethernet Interface Collection", members))
	})
	svc.route("GET "+sys+"/EthernetInterfaces/{id}", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		i := slices.IndexFunc(q.srv.HW.NICs, func(n server.NIC) bool { return n.ID == q.r.PathValue("id") })
		if i < 0 {
			q.notFound()
			return
		}
		n := q.srv.HW.NICs[i]
		q.json(http.StatusOK, M{
			"@odata.id":           sysPath(q.srv) + "/EthernetInterfaces/" + n.ID,
			"@odata.type":         "#EthernetInterface.v1_12_0.EthernetInterface",
			"Id":                  n.ID,
			"Name":                "Ethernet Interface " + n.ID,
			"MACAddress":          n.MAC,
			"PermanentMACAddress": n.MAC,
			"SpeedMbps":           n.SpeedMbps,
			"FullDuplex":          true,
			"LinkStatus":          "LinkUp",
			"InterfaceEnabled":    true,
			"Status":              statusOK,
		})
	})
	svc.route("GET "+sys+"/SecureBoot", false, func(q *request) {
		if q.owns("sys") {
			q.json(http.StatusOK, secureBootBody(q.srv))
		}
	})
	svc.route("PATCH "+sys+"/SecureBoot", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var body map[string]json.RawMessage
		if !q.decode(&body, false) {
			return
		}
		for k := range body {
			if k != "SecureBootEnable" {
				q.error(http.StatusBadRequest, "PropertyNotWritable", "The property "+k+" is a read only property and cannot be assigned a value.", k)
				return
			}
		}
		var enable bool
		if err := json.Unmarshal(body["SecureBootEnable"], &enable); err != nil {
			q.error(http.StatusBadRequest, "PropertyValueTypeError", "The value for the property SecureBootEnable is of a different type than the property can accept.", "SecureBootEnable")
			return
		}
		srv := q.srv
		if err := srv.SetSecureBoot(enable, q.ifMatch(func(st *server.State) M { return secureBootBodyOf(srv, st) })); err != nil {
			q.fail(err)
			return
		}
		q.noContent()
	})
	svc.route("POST "+sys+"/SecureBoot/Actions/SecureBoot.ResetKeys", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var body struct{ ResetKeysType string }
		if !q.decode(&body, false) {
			return
		}
		if !slices.Contains(resetKeysTypes, body.ResetKeysType) {
			q.error(http.StatusBadRequest, "ActionParameterNotSupported", "The parameter ResetKeysType value "+body.ResetKeysType+" is not supported.", body.ResetKeysType, "SecureBoot.ResetKeys")
			return
		}
		q.noContent()
	})
}

var resetKeysTypes = []string{"ResetAllKeysToDefault", "DeleteAllKeys", "DeletePK"}

func (svc *Service) systemBody(s *server.Server) M {
	var body M
	s.View(func(st *server.State) { body = svc.systemBodyOf(s, st) })
	return body
}

// systemBodyOf renders the System from its state; call it under the server's lock.
func (svc *Service) systemBodyOf(s *server.Server, st *server.State) M {
	p := &svc.fleet.Config().Profile
	hw := s.HW
	path := sysPath(s)
	boot := M{
		"BootSourceOverrideTarget":                          st.Boot.Target,
		"BootSourceOverrideTarget@Redfish.AllowableValues":  server.BootTargets,
		"BootSourceOverrideEnabled":                         st.Boot.Enabled,
		"BootSourceOverrideEnabled@Redfish.AllowableValues": server.BootEnabledValues,
		"BootSourceOverrideMode":                            st.Boot.Mode,
		"BootSourceOverrideMode@Redfish.AllowableValues":    server.BootModes,
		"HttpBootUri": nil,
	}
	if st.Boot.HTTPBootURI != "" {
		boot["HttpBootUri"] = st.Boot.HTTPBootURI
	}
	return M{
		"@odata.id":               path,
		"@odata.type":             "#ComputerSystem.v1_22_0.ComputerSystem",
		"Id":                      s.ID(),
		"Name":                    p.Model,
		"HostName":                s.Name,
		"SystemType":              "Physical",
		"Manufacturer":            p.Manufacturer,
		"Model":                   p.Model,
		"SKU":                     "SIM-" + hw.Serial[:4],
		"SerialNumber":            hw.Serial,
		"UUID":                    hw.UUID,
		"AssetTag":                st.AssetTag,
		"IndicatorLED":            st.IndicatorLED,
		"LocationIndicatorActive": st.IndicatorLED != "Off",
		"PowerState":              st.Power,
		"BiosVersion":             st.Firmware.BIOS,
		"Status":                  statusOK,
		"Boot":                    boot,
		"ProcessorSummary": M{
			"Count":                 len(hw.Processors),
			"CoreCount":             p.CPU.Sockets * p.CPU.CoresPerSocket,
			"LogicalProcessorCount": hw.TotalThreads,
			"Model":                 p.CPU.Model,
			"Status":                statusOK,
		},
		"MemorySummary":      M{"TotalSystemMemoryGiB": hw.MemoryGiB, "Status": statusOK},
		"Processors":         ref(path + "/Processors"),
		"Memory":             ref(path + "/Memory"),
		"EthernetInterfaces": ref(path + "/EthernetInterfaces"),
		"SimpleStorage":      ref(path + "/SimpleStorage"),
		"Storage":            ref(path + "/Storage"),
		"Bios":               ref(path + "/Bios"),
		"SecureBoot":         ref(path + "/SecureBoot"),
		"Links": M{
			"ManagedBy": refs(managerPath(s)),
			"Chassis":   refs(chassisOf(s)),
		},
		"Actions": M{
			"#ComputerSystem.Reset": M{
				"target":                            path + "/Actions/ComputerSystem.Reset",
				"ResetType@Redfish.AllowableValues": server.ResetTypes,
			},
		},
	}
}

func secureBootBody(s *server.Server) M {
	var body M
	s.View(func(st *server.State) { body = secureBootBodyOf(s, st) })
	return body
}

// secureBootBodyOf renders SecureBoot from the state; call it under the server's lock.
func secureBootBodyOf(s *server.Server, st *server.State) M {
	path := sysPath(s) + "/SecureBoot"
	current, mode := "Disabled", "SetupMode"
	if st.SecureBootCurrent {
		current = "Enabled"
	}
	if st.SecureBoot {
		mode = "DeployedMode"
	}
	return M{
		"@odata.id":             path,
		"@odata.type":           "#SecureBoot.v1_1_2.SecureBoot",
		"Id":                    "SecureBoot",
		"Name":                  "UEFI Secure Boot",
		"SecureBootEnable":      st.SecureBoot,
		"SecureBootCurrentBoot": current,
		"SecureBootMode":        mode,
		"Actions": M{"#SecureBoot.ResetKeys": M{
			"target":                                path + "/Actions/SecureBoot.ResetKeys",
			"ResetKeysType@Redfish.AllowableValues": resetKeysTypes,
		}},
	}
}
