package redfish

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

var managerResetTypes = []string{"GracefulRestart", "ForceRestart"}

func (svc *Service) managerRoutes() {
	const mgr = managersPath + "/{mgr}"
	const vm = mgr + "/VirtualMedia"
	svc.route("GET "+managersPath, false, func(q *request) {
		q.json(http.StatusOK, collection(managersPath, "#ManagerCollection.ManagerCollection", "Manager Collection", []string{managerPath(q.srv)}))
	})
	svc.route("GET "+mgr, false, func(q *request) {
		if q.owns("mgr") {
			q.json(http.StatusOK, managerBody(q.srv))
		}
	})
	svc.route("POST "+mgr+"/Actions/Manager.Reset", false, func(q *request) {
		if !q.owns("mgr") {
			return
		}
		var body struct{ ResetType string }
		if !q.decode(&body, true) {
			return
		}
		if body.ResetType != "" && !slices.Contains(managerResetTypes, body.ResetType) {
			q.error(http.StatusBadRequest, "ActionParameterNotSupported", "The parameter ResetType value "+body.ResetType+" is not supported by the action Manager.Reset.", body.ResetType, "Manager.Reset")
			return
		}
		q.srv.ManagerReset()
		q.noContent()
	})
	svc.route("GET "+vm, false, func(q *request) {
		if !q.owns("mgr") {
			return
		}
		var members []string
		for _, d := range server.MediaDevices {
			members = append(members, managerPath(q.srv)+"/VirtualMedia/"+d)
		}
		q.json(http.StatusOK, collection(managerPath(q.srv)+"/VirtualMedia", "#VirtualMediaCollection.VirtualMediaCollection", "Virtual Media Services", members))
	})
	svc.route("GET "+vm+"/{dev}", false, func(q *request) {
		if q.owns("mgr") && q.device() {
			q.w.Header().Set("Allow", "GET, PATCH")
			q.json(http.StatusOK, mediaBody(q.srv, q.r.PathValue("dev")))
		}
	})
	svc.route("POST "+vm+"/{dev}/Actions/VirtualMedia.InsertMedia", false, func(q *request) {
		if !q.owns("mgr") || !q.device() {
			return
		}
		var body struct {
			Image                string
			Inserted             *bool
			WriteProtected       *bool
			TransferProtocolType string
			TransferMethod       string
		}
		if !q.decode(&body, false) {
			return
		}
		if body.Image == "" {
			q.error(http.StatusBadRequest, "ActionParameterMissing", "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.", "VirtualMedia.InsertMedia", "Image")
			return
		}
		if p := strings.ToUpper(body.TransferProtocolType); p != "" && p != "HTTP" && p != "HTTPS" {
			q.error(http.StatusBadRequest, "ActionParameterNotSupported", "The parameter TransferProtocolType value "+body.TransferProtocolType+" is not supported.", body.TransferProtocolType, "VirtualMedia.InsertMedia")
			return
		}
		if err := q.srv.InsertMedia(q.r.Context(), q.r.PathValue("dev"), body.Image, body.Inserted, body.WriteProtected, nil); err != nil {
			q.fail(err)
			return
		}
		q.noContent()
	})
	svc.route("POST "+vm+"/{dev}/Actions/VirtualMedia.EjectMedia", false, func(q *request) {
		if !q.owns("mgr") || !q.device() {
			return
		}
		if err := q.srv.EjectMedia(q.r.PathValue("dev"), nil); err != nil {
			q.fail(err)
			return
		}
		q.noContent()
	})
	// PATCH is the older way to insert and eject (and what sushy falls back to).
	svc.route("PATCH "+vm+"/{dev}", false, func(q *request) {
		if !q.owns("mgr") || !q.device() {
			return
		}
		srv, dev := q.srv, q.r.PathValue("dev")
		pre := q.ifMatch(func(st *server.State) M { return mediaBodyOf(srv, dev, st.Media[dev]) })
		var body map[string]json.RawMessage
		if !q.decode(&body, false) {
			return
		}
		var image *string
		var inserted, wp *bool
		for k, v := range body {
			var err error
			switch k {
			case "Image":
				err = json.Unmarshal(v, &image)
			case "Inserted":
				err = json.Unmarshal(v, &inserted)
			case "WriteProtected":
				err = json.Unmarshal(v, &wp)
			case "TransferProtocolType", "TransferMethod", "UserName", "Password":
			default:
				q.error(http.StatusBadRequest, "PropertyNotWritable", "The property "+k+" is a read only property and cannot be assigned a value.", k)
				return
			}
			if err != nil {
				q.error(http.StatusBadRequest, "PropertyValueTypeError", "The value for the property "+k+" is of a different type than the property can accept.", k)
				return
			}
		}
		var err error
		switch {
		case image != nil && *image != "" && (inserted == nil || *inserted):
			err = srv.InsertMedia(q.r.Context(), dev, *image, inserted, wp, pre)
		case (image != nil && *image == "") || image == nil && inserted != nil && !*inserted:
			err = srv.EjectMedia(dev, pre)
		case image != nil:
			err = srv.InsertMedia(q.r.Context(), dev, *image, inserted, wp, pre)
		}
		if err != nil {
			q.fail(err)
			return
		}
		q.noContent()
	})
}

// device checks the {dev} path segment names a virtual media device.
func (q *request) device() bool {
	if !slices.Contains(server.MediaDevices, q.r.PathValue("dev")) {
		q.notFound()
		return false
	}
	return true
}

func managerBody(s *server.Server) M {
	p := managerPath(s)
	var fw string
	s.View(func(st *server.State) { fw = st.Firmware.BMC })
	return M{
		"@odata.id":       p,
		"@odata.type":     "#Manager.v1_19_0.Manager",
		"Id":              s.ID(),
		"Name":            "Manager",
		"Description":     "Baseboard management controller of " + s.Name,
		"ManagerType":     "BMC",
		"UUID":            s.ID(),
		"Model":           "SimBMC",
		"FirmwareVersion": fw,
		"PowerState":      "On",
		"Status":          statusOK,
		"VirtualMedia":    ref(p + "/VirtualMedia"),
		"Links": M{
			"ManagerForServers": refs(sysPath(s)),
			"ManagerForChassis": refs(chassisOf(s)),
		},
		"Actions": M{"#Manager.Reset": M{
			"target":                            p + "/Actions/Manager.Reset",
			"ResetType@Redfish.AllowableValues": managerResetTypes,
		}},
	}
}

func mediaBody(s *server.Server, dev string) M {
	var m server.Media
	s.View(func(st *server.State) { m = st.Media[dev] })
	return mediaBodyOf(s, dev, m)
}

// mediaBodyOf renders a virtual media device in state m.
func mediaBodyOf(s *server.Server, dev string, m server.Media) M {
	p := managerPath(s) + "/VirtualMedia/" + dev
	name, types := "Virtual CD", []string{"CD", "DVD"}
	if dev == server.MediaFloppy {
		name, types = "Virtual Removable Media", []string{"Floppy", "USBStick"}
	}
	body := M{
		"@odata.id":            p,
		"@odata.type":          "#VirtualMedia.v1_6_3.VirtualMedia",
		"Id":                   dev,
		"Name":                 name,
		"MediaTypes":           types,
		"Image":                nil,
		"ImageName":            nil,
		"Inserted":             m.Inserted,
		"WriteProtected":       m.WriteProtected,
		"ConnectedVia":         "NotConnected",
		"TransferProtocolType": nil,
		"TransferMethod":       "Stream",
		"Status":               statusOK,
		"Actions": M{
			"#VirtualMedia.InsertMedia": M{"target": p + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  M{"target": p + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	if m.Image != "" {
		body["Image"] = m.Image
		body["ConnectedVia"] = "URI"
		if u, err := url.Parse(m.Image); err == nil {
			body["ImageName"] = path.Base(u.Path)
			body["TransferProtocolType"] = strings.ToUpper(u.Scheme)
		}
	}
	return body
}
