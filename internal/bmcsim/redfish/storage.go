package redfish

import (
	"net/http"
	"strings"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// storageID is the one storage controller (and simple storage) every server has.
const storageID = "1"

func storagePath(s *server.Server) string { return sysPath(s) + "/Storage/" + storageID }

var applyTimeSupport = M{
	"@odata.type":     "#Settings.v1_4_0.OperationApplyTimeSupport",
	"SupportedValues": []string{server.ApplyImmediate, server.ApplyOnReset},
}

func (svc *Service) storageRoutes() {
	const sys = systemsPath + "/{sys}"
	const stor = sys + "/Storage/{st}"
	svc.route("GET "+sys+"/SimpleStorage", false, func(q *request) {
		if q.owns("sys") {
			q.json(http.StatusOK, collection(sysPath(q.srv)+"/SimpleStorage", "#SimpleStorageCollection.SimpleStorageCollection",
				"Simple Storage Collection", []string{sysPath(q.srv) + "/SimpleStorage/" + storageID}))
		}
	})
	svc.route("GET "+sys+"/SimpleStorage/{st}", false, func(q *request) {
		if !q.owns("sys") || !q.storage() {
			return
		}
		var devices []M
		for _, d := range q.srv.HW.Drives {
			devices = append(devices, M{
				"Name": d.ID, "Manufacturer": d.Vendor, "Model": d.Model,
				"CapacityBytes": d.SizeBytes, "Status": statusOK,
			})
		}
		q.json(http.StatusOK, M{
			"@odata.id":   sysPath(q.srv) + "/SimpleStorage/" + storageID,
			"@odata.type": "#SimpleStorage.v1_3_1.SimpleStorage",
			"Id":          storageID,
			"Name":        "Simple Storage Controller",
			"Devices":     devices,
			"Status":      statusOK,
		})
	})
	svc.route("GET "+sys+"/Storage", false, func(q *request) {
		if q.owns("sys") {
			q.json(http.StatusOK, collection(sysPath(q.srv)+"/Storage", "#StorageCollection.StorageCollection",
				"Storage Collection", []string{storagePath(q.srv)}))
		}
	})
	svc.route("GET "+stor, false, func(q *request) {
		if q.owns("sys") && q.storage() {
			q.json(http.StatusOK, svc.storageBody(q.srv))
		}
	})
	svc.route("GET "+stor+"/Drives/{d}", false, func(q *request) {
		if !q.owns("sys") || !q.storage() {
			return
		}
		d, ok := q.srv.Drive(q.r.PathValue("d"))
		if !ok {
			q.notFound()
			return
		}
		q.json(http.StatusOK, driveBody(q.srv, d))
	})
	svc.route("GET "+stor+"/Volumes", false, func(q *request) {
		if q.owns("sys") && q.storage() {
			q.json(http.StatusOK, volumesBody(q.srv))
		}
	})
	svc.route("POST "+stor+"/Volumes", false, svc.createVolume)
	svc.route("GET "+stor+"/Volumes/{v}", false, func(q *request) {
		if !q.owns("sys") || !q.storage() {
			return
		}
		if v, ok := volume(q.srv, q.r.PathValue("v")); ok {
			q.json(http.StatusOK, volumeBody(q.srv, v))
			return
		}
		q.notFound()
	})
	svc.route("DELETE "+stor+"/Volumes/{v}", false, func(q *request) {
		if !q.owns("sys") || !q.storage() {
			return
		}
		v, ok := volume(q.srv, q.r.PathValue("v"))
		if !ok {
			q.notFound()
			return
		}
		var body struct {
			ApplyTime string `json:"@Redfish.OperationApplyTime"`
		}
		if !q.decode(&body, true) {
			return
		}
		srv := q.srv
		pre := q.ifMatch(func(st *server.State) M {
			cur, _ := volumeIn(st, v.ID) // DeleteVolume answers 404 before it checks If-Match
			return volumeBody(srv, cur)
		})
		taskID, err := srv.DeleteVolume(v.ID, body.ApplyTime, q.r.URL.Path, pre)
		if err != nil {
			q.fail(err)
			return
		}
		if taskID != "" {
			q.accepted(taskID)
			return
		}
		q.noContent()
	})
	svc.route("POST "+stor+"/Volumes/{v}/Actions/Volume.Initialize", false, func(q *request) {
		if !q.owns("sys") || !q.storage() {
			return
		}
		if _, ok := volume(q.srv, q.r.PathValue("v")); !ok {
			q.notFound()
			return
		}
		var body struct{ InitializeType string }
		if !q.decode(&body, true) {
			return
		}
		if body.InitializeType != "" && body.InitializeType != "Fast" && body.InitializeType != "Slow" {
			q.error(http.StatusBadRequest, "ActionParameterNotSupported", "The parameter InitializeType value "+body.InitializeType+" is not supported.", body.InitializeType, "Volume.Initialize")
			return
		}
		q.noContent()
	})
}

// storage checks the {st} path segment names the one controller.
func (q *request) storage() bool {
	if q.r.PathValue("st") != storageID {
		q.notFound()
		return false
	}
	return true
}

func (svc *Service) storageBody(s *server.Server) M {
	p := &svc.fleet.Config().Profile
	path := storagePath(s)
	var drives []string
	protocols := map[string]bool{}
	for _, d := range s.HW.Drives {
		drives = append(drives, path+"/Drives/"+d.ID)
		protocols[d.Protocol] = true
	}
	var devProtocols []string
	for _, pr := range []string{"SAS", "SATA", "NVMe"} {
		if protocols[pr] {
			devProtocols = append(devProtocols, pr)
		}
	}
	var fw string
	s.View(func(st *server.State) { fw = st.Firmware.BIOS })
	return M{
		"@odata.id":   path,
		"@odata.type": "#Storage.v1_16_0.Storage",
		"Id":          storageID,
		"Name":        "RAID Controller",
		"Status":      statusOK,
		"StorageControllers": []M{{
			"@odata.id":                    path + "#/StorageControllers/0",
			"MemberId":                     "0",
			"Name":                         "Sim RAID Controller",
			"Manufacturer":                 p.Manufacturer,
			"Model":                        "SimRAID 9000",
			"FirmwareVersion":              fw,
			"SpeedGbps":                    12,
			"SupportedControllerProtocols": []string{"PCIe"},
			"SupportedDeviceProtocols":     devProtocols,
			"SupportedRAIDTypes":           p.RAIDTypes,
			"Status":                       statusOK,
		}},
		"Drives":             refs(drives...),
		"Drives@odata.count": len(drives),
		"Volumes":            ref(path + "/Volumes"),
		"Links":              M{"Enclosures": refs(chassisOf(s))},
	}
}

func driveBody(s *server.Server, d server.Drive) M {
	path := storagePath(s)
	var vols []string
	s.View(func(st *server.State) {
		for _, v := range st.Volumes {
			for _, id := range v.Drives {
				if id == d.ID {
					vols = append(vols, path+"/Volumes/"+v.ID)
				}
			}
		}
	})
	body := M{
		"@odata.id":      path + "/Drives/" + d.ID,
		"@odata.type":    "#Drive.v1_19_0.Drive",
		"Id":             d.ID,
		"Name":           d.ID,
		"CapacityBytes":  d.SizeBytes,
		"MediaType":      d.MediaType,
		"Protocol":       d.Protocol,
		"Manufacturer":   d.Vendor,
		"Model":          d.Model,
		"SerialNumber":   d.Serial,
		"Revision":       "1.0",
		"BlockSizeBytes": 512,
		"Identifiers":    []M{{"DurableNameFormat": "NAA", "DurableName": strings.TrimPrefix(d.WWN, "0x")}},
		"Status":         statusOK,
		"Links":          M{"Volumes": refs(vols...), "Chassis": ref(chassisOf(s))},
	}
	if d.MediaType == "HDD" {
		body["RotationSpeedRPM"] = 7200
	}
	return body
}

func volumesBody(s *server.Server) M {
	path := storagePath(s) + "/Volumes"
	var members []string
	s.View(func(st *server.State) {
		for _, v := range st.Volumes {
			members = append(members, path+"/"+v.ID)
		}
	})
	body := collection(path, "#VolumeCollection.VolumeCollection", "Volume Collection", members)
	body["@Redfish.OperationApplyTimeSupport"] = applyTimeSupport
	return body
}

func volume(s *server.Server, id string) (server.Volume, bool) {
	var out server.Volume
	var ok bool
	s.View(func(st *server.State) { out, ok = volumeIn(st, id) })
	return out, ok
}

func volumeIn(st *server.State, id string) (server.Volume, bool) {
	for _, v := range st.Volumes {
		if v.ID == id {
			return v, true
		}
	}
	return server.Volume{}, false
}

func volumeBody(s *server.Server, v server.Volume) M {
	path := storagePath(s) + "/Volumes/" + v.ID
	var drives []string
	for _, d := range v.Drives {
		drives = append(drives, storagePath(s)+"/Drives/"+d)
	}
	return M{
		"@odata.id":      path,
		"@odata.type":    "#Volume.v1_10_0.Volume",
		"Id":             v.ID,
		"Name":           v.Name,
		"CapacityBytes":  v.CapacityBytes,
		"RAIDType":       v.RAIDType,
		"VolumeType":     config.RAIDLevels[v.RAIDType].VolumeType,
		"Encrypted":      false,
		"BlockSizeBytes": 512,
		"Identifiers":    []M{{"DurableNameFormat": "UUID", "DurableName": s.HW.UUID[:24] + strings.Repeat("0", 12-len(v.ID)) + v.ID}},
		"Status":         statusOK,
		"Links":          M{"Drives": refs(drives...)},
		"Actions": M{"#Volume.Initialize": M{
			"target":                                 path + "/Actions/Volume.Initialize",
			"InitializeType@Redfish.AllowableValues": []string{"Fast", "Slow"},
		}},
		"@Redfish.OperationApplyTimeSupport": applyTimeSupport,
	}
}

// volumeTypeRAID maps a VolumeType to the RAID type bmcsim builds for it, for clients that send
// only VolumeType.
var volumeTypeRAID = map[string]string{
	"NonRedundant":      "RAID0",
	"Mirrored":          "RAID1",
	"StripedWithParity": "RAID5",
	"SpannedMirrors":    "RAID10",
}

func (svc *Service) createVolume(q *request) {
	if !q.owns("sys") || !q.storage() {
		return
	}
	var body struct {
		Name          string
		RAIDType      string
		VolumeType    string
		CapacityBytes *int64
		Links         struct {
			Drives []struct {
				ID string `json:"@odata.id"`
			}
		}
		ApplyTime string `json:"@Redfish.OperationApplyTime"`
	}
	if !q.decode(&body, false) {
		return
	}
	raid := body.RAIDType
	if raid == "" {
		raid = volumeTypeRAID[body.VolumeType]
	}
	if raid == "" {
		q.error(http.StatusBadRequest, "PropertyMissing", "The property RAIDType is a required property and must be included in the request.", "RAIDType")
		return
	}
	prefix := storagePath(q.srv) + "/Drives/"
	var drives []string
	for _, d := range body.Links.Drives {
		if !strings.HasPrefix(d.ID, prefix) {
			q.error(http.StatusBadRequest, "ResourceNotFound", "The drive "+d.ID+" is not attached to this storage controller.", "Drive", d.ID)
			return
		}
		drives = append(drives, strings.TrimPrefix(d.ID, prefix))
	}
	var size int64
	if body.CapacityBytes != nil {
		size = *body.CapacityBytes
	}
	v, taskID, err := q.srv.CreateVolume(server.VolumeRequest{
		Name: body.Name, RAIDType: raid, CapacityBytes: size, Drives: drives,
		ApplyTime: body.ApplyTime, TargetURI: q.r.URL.Path,
	})
	if err != nil {
		q.fail(err)
		return
	}
	if taskID != "" {
		q.accepted(taskID)
		return
	}
	q.w.Header().Set("Location", storagePath(q.srv)+"/Volumes/"+v.ID)
	q.json(http.StatusCreated, volumeBody(q.srv, *v))
}
