package redfish

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

const (
	registriesPath = "/redfish/v1/Registries"
	registryFile   = registriesPath + "/" + config.BIOSRegistryName
	registryURI    = registryFile + "/" + config.BIOSRegistryName + ".json"
)

// biosApplyTimes are the apply times the BIOS settings object supports: like most servers, BIOS
// changes take effect when the server next boots.
var biosApplyTimes = []string{"OnReset"}

func (svc *Service) biosRoutes() {
	const bios = systemsPath + "/{sys}/Bios"
	svc.route("GET "+bios, false, func(q *request) {
		if q.owns("sys") {
			q.json(http.StatusOK, biosBody(q.srv))
		}
	})
	svc.route("GET "+bios+"/Settings", false, func(q *request) {
		if q.owns("sys") {
			q.json(http.StatusOK, biosSettingsBody(q.srv))
		}
	})
	svc.route("PATCH "+bios+"/Settings", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var body map[string]json.RawMessage
		if !q.decode(&body, false) {
			return
		}
		var attrs map[string]any
		for k, v := range body {
			switch k {
			case "Attributes":
				if err := json.Unmarshal(v, &attrs); err != nil {
					q.error(http.StatusBadRequest, "PropertyValueTypeError", "The value for the property Attributes is of a different type than the property can accept.", "Attributes")
					return
				}
			case "@Redfish.SettingsApplyTime":
				var at struct{ ApplyTime string }
				if err := json.Unmarshal(v, &at); err != nil || (at.ApplyTime != "" && at.ApplyTime != "OnReset") {
					q.error(http.StatusBadRequest, "PropertyValueNotInList", "The value for @Redfish.SettingsApplyTime/ApplyTime is not supported; use OnReset.", "@Redfish.SettingsApplyTime/ApplyTime")
					return
				}
			case "@odata.type", "@odata.id":
			default:
				q.error(http.StatusBadRequest, "PropertyUnknown", "The property "+k+" is not in the list of valid properties for the resource.", k)
				return
			}
		}
		srv := q.srv
		if err := srv.SetPendingBIOS(attrs, q.ifMatch(func(st *server.State) M { return biosSettingsBodyOf(srv, st.PendingBIOS) })); err != nil {
			if !errors.Is(err, server.ErrInvalid) {
				q.fail(err)
				return
			}
			id := "PropertyValueNotInList"
			if errors.Is(err, config.ErrValueType) {
				id = "PropertyValueTypeError"
			}
			q.error(http.StatusBadRequest, id, err.Error())
			return
		}
		q.noContent()
	})
	svc.route("POST "+bios+"/Actions/Bios.ResetBios", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		q.srv.ResetBIOS()
		q.noContent()
	})
	svc.route("POST "+bios+"/Actions/Bios.ChangePassword", false, func(q *request) {
		if !q.owns("sys") {
			return
		}
		var body struct{ PasswordName, OldPassword, NewPassword string }
		if !q.decode(&body, false) {
			return
		}
		if body.PasswordName == "" {
			q.error(http.StatusBadRequest, "ActionParameterMissing", "The action Bios.ChangePassword requires the parameter PasswordName.", "Bios.ChangePassword", "PasswordName")
			return
		}
		q.noContent()
	})
	svc.route("GET "+registriesPath, false, func(q *request) {
		q.json(http.StatusOK, collection(registriesPath, "#MessageRegistryFileCollection.MessageRegistryFileCollection",
			"Registry File Collection", []string{registryFile}))
	})
	svc.route("GET "+registryFile, false, func(q *request) {
		q.json(http.StatusOK, M{
			"@odata.id":   registryFile,
			"@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
			"Id":          config.BIOSRegistryName,
			"Name":        "BIOS Attribute Registry File",
			"Description": "Registry of the BIOS attributes of this server",
			"Languages":   []string{"en"},
			"Registry":    config.BIOSRegistryName,
			"Location":    []M{{"Language": "en", "Uri": registryURI}},
		})
	})
	svc.route("GET "+registryURI, false, func(q *request) { q.json(http.StatusOK, svc.attributeRegistry()) })
}

func biosBody(s *server.Server) M {
	path := sysPath(s) + "/Bios"
	var attrs map[string]any
	s.View(func(st *server.State) { attrs = s.BIOSAttributes(st) })
	return M{
		"@odata.id":         path,
		"@odata.type":       "#Bios.v1_2_1.Bios",
		"Id":                "Bios",
		"Name":              "BIOS Configuration Current Settings",
		"AttributeRegistry": config.BIOSRegistryName,
		"Attributes":        attrs,
		"@Redfish.Settings": M{
			"@odata.type":         "#Settings.v1_4_0.Settings",
			"SettingsObject":      ref(path + "/Settings"),
			"SupportedApplyTimes": biosApplyTimes,
		},
		"Actions": M{
			"#Bios.ResetBios":      M{"target": path + "/Actions/Bios.ResetBios"},
			"#Bios.ChangePassword": M{"target": path + "/Actions/Bios.ChangePassword"},
		},
	}
}

// biosSettingsBody is the settings object: the values waiting for the next boot.
func biosSettingsBody(s *server.Server) M { return biosSettingsBodyOf(s, s.PendingBIOS()) }

// biosSettingsBodyOf renders the settings object with these pending values.
func biosSettingsBodyOf(s *server.Server, pending map[string]any) M {
	if pending == nil {
		pending = map[string]any{}
	}
	return M{
		"@odata.id":                  sysPath(s) + "/Bios/Settings",
		"@odata.type":                "#Bios.v1_2_1.Bios",
		"Id":                         "Settings",
		"Name":                       "BIOS Configuration Pending Settings",
		"AttributeRegistry":          config.BIOSRegistryName,
		"Attributes":                 pending,
		"@Redfish.SettingsApplyTime": M{"@odata.type": "#Settings.v1_4_0.PreferredApplyTime", "ApplyTime": "OnReset"},
	}
}

func (svc *Service) attributeRegistry() M {
	defaults := svc.fleet.BIOSDefaults()
	p := &svc.fleet.Config().Profile
	var entries []M
	for _, a := range config.BIOSAttributes {
		e := M{
			"AttributeName": a.Name,
			"DisplayName":   a.DisplayName,
			"Type":          a.Type,
			"ReadOnly":      a.ReadOnly,
			"ResetRequired": true,
			"Immutable":     a.ReadOnly,
			"Hidden":        false,
			"DefaultValue":  defaults[a.Name],
		}
		switch a.Type {
		case "Enumeration":
			var values []M
			for _, v := range a.Values {
				values = append(values, M{"ValueName": v, "ValueDisplayName": v})
			}
			e["Value"] = values
		case "Integer":
			e["LowerBound"], e["UpperBound"], e["ScalarIncrement"] = a.Lower, a.Upper, 1
		case "String":
			e["MinLength"], e["MaxLength"] = 0, a.MaxLen
		}
		entries = append(entries, e)
	}
	return M{
		"@odata.id":        registryURI,
		"@odata.type":      "#AttributeRegistry.v1_3_8.AttributeRegistry",
		"Id":               config.BIOSRegistryName,
		"Name":             "BIOS Attribute Registry",
		"Language":         "en",
		"OwningEntity":     p.Manufacturer,
		"RegistryVersion":  "1.0.0",
		"SupportedSystems": []M{{"ProductName": p.Model, "SystemId": "SIM1000", "FirmwareVersion": p.Firmware.BIOS}},
		"RegistryEntries":  M{"Attributes": entries},
	}
}
