package redfish

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// patchSystem reads the whole PATCH before anything changes, and the server applies all of it or
// nothing: a bad IndicatorLED must not leave the Boot part of the same PATCH applied.
func (svc *Service) patchSystem(q *request) {
	if !q.owns("sys") {
		return
	}
	var body map[string]json.RawMessage
	if !q.decode(&body, false) {
		return
	}
	var patch server.SystemPatch
	for k, raw := range body {
		ok := true
		switch k {
		case "Boot":
			ok = q.bootPatch(raw, &patch.Boot)
		case "IndicatorLED":
			ok = q.stringProperty(k, raw, &patch.IndicatorLED, false)
		case "AssetTag":
			ok = q.stringProperty(k, raw, &patch.AssetTag, true)
		case "LocationIndicatorActive":
		default:
			q.error(http.StatusBadRequest, "PropertyNotWritable", "The property "+k+" is a read only property and cannot be assigned a value.", k)
			return
		}
		if !ok {
			return
		}
	}
	// LocationIndicatorActive is the newer name of the same LED; it wins when both are sent.
	if raw, ok := body["LocationIndicatorActive"]; ok {
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			q.error(http.StatusBadRequest, "PropertyValueTypeError", "The value for LocationIndicatorActive is not a boolean.", "LocationIndicatorActive")
			return
		}
		led := "Off"
		if v {
			led = "Lit"
		}
		patch.IndicatorLED = &led
	}
	srv := q.srv
	err := srv.PatchSystem(patch, q.ifMatch(func(st *server.State) M { return svc.systemBodyOf(srv, st) }))
	switch {
	case err == nil:
		q.noContent()
	case errors.Is(err, server.ErrInvalid):
		q.error(http.StatusBadRequest, "PropertyValueNotInList", err.Error())
	default:
		q.fail(err)
	}
}

// bootPatch reads the Boot object of a System PATCH; on bad input it answers 400 and returns false.
func (q *request) bootPatch(raw json.RawMessage, patch *server.BootPatch) bool {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(raw, &b); err != nil {
		q.error(http.StatusBadRequest, "PropertyValueTypeError", "The value for the property Boot is of a different type than the property can accept.", "Boot")
		return false
	}
	for k, v := range b {
		var dst **string
		switch k {
		case "BootSourceOverrideTarget":
			dst = &patch.Target
		case "BootSourceOverrideEnabled":
			dst = &patch.Enabled
		case "BootSourceOverrideMode":
			dst = &patch.Mode
		case "HttpBootUri":
			dst = &patch.HTTPBootURI
		case "UefiTargetBootSourceOverride":
			continue
		default:
			q.error(http.StatusBadRequest, "PropertyUnknown", "The property Boot/"+k+" is not in the list of valid properties for the resource.", "Boot/"+k)
			return false
		}
		// null clears HttpBootUri and leaves the other (never null) properties alone.
		if !q.stringProperty("Boot/"+k, v, dst, k == "HttpBootUri") {
			return false
		}
	}
	return true
}

// stringProperty reads a string property into *dst; null sets "" when nullClears, else nothing.
// On a value of another type it answers 400 and returns false.
func (q *request) stringProperty(name string, raw json.RawMessage, dst **string, nullClears bool) bool {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		q.error(http.StatusBadRequest, "PropertyValueTypeError", "The value for the property "+name+" is of a different type than the property can accept.", name)
		return false
	}
	if s == nil && nullClears {
		s = new(string)
	}
	if s != nil {
		*dst = s
	}
	return true
}
