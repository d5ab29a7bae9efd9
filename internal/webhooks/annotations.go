package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

var (
	rebootModes     = []metal3.RebootMode{"", metal3.RebootModeHard, metal3.RebootModeSoft}
	detachedActions = []metal3.DetachedDeleteAction{"", metal3.DetachedDeleteActionDelay, metal3.DetachedDeleteActionDelete}
	inspectValues   = []string{"", metal3.InspectAnnotationValueDisabled}

	// statusAnnotationOperationalStatuses and statusAnnotationErrorTypes are every value the CRD
	// enums allow. metal3's lists for this check forgot "servicing" and "servicing error" (and
	// "detach error"), so the status of a host moved while servicing was refused there.
	statusAnnotationOperationalStatuses = []metal3.OperationalStatus{
		"", metal3.OperationalStatusOK, metal3.OperationalStatusDiscovered, metal3.OperationalStatusError,
		metal3.OperationalStatusDelayed, metal3.OperationalStatusDetached, metal3.OperationalStatusServicing,
	}
	statusAnnotationErrorTypes = []metal3.ErrorType{
		"", metal3.ProvisionedRegistrationError, metal3.RegistrationError, metal3.InspectionError,
		metal3.PreparationError, metal3.ProvisioningError, metal3.PowerManagementError,
		metal3.ServicingError, metal3.DetachError,
	}
)

const (
	rebootForm   = `empty, or the JSON object {"mode": "hard"|"soft", "force": true|false}`
	detachedForm = `empty, or the JSON object {"deleteAction": "delay"|"delete", "force": true|false}`
)

// validateHostAnnotations checks the values of the annotations the host controller reads, so a
// typo is refused when written instead of being ignored (or worse, half-understood) later.
func validateHostAnnotations(host *metal3.BareMetalHost) field.ErrorList {
	base := field.NewPath("metadata", "annotations")
	keys := make([]string, 0, len(host.Annotations))
	for k := range host.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys) // stable error order
	var errs field.ErrorList
	for _, key := range keys {
		value, path := host.Annotations[key], base.Key(key)
		switch {
		case isRebootAnnotation(key):
			errs = append(errs, validateRebootAnnotation(value, path)...)
		case key == metal3.DetachedAnnotation:
			errs = append(errs, validateDetachedAnnotation(value, path)...)
		case key == metal3.InspectAnnotationPrefix:
			if !slices.Contains(inspectValues, value) {
				errs = append(errs, field.NotSupported(path, value, inspectValues))
			}
		case key == metal3.HardwareDetailsAnnotation:
			errs = append(errs, validateHardwareDetailsAnnotation(value, host.InspectionDisabled(), path)...)
		case key == metal3.StatusAnnotation:
			errs = append(errs, validateStatusAnnotation(value, path)...)
		}
	}
	return errs
}

// isRebootAnnotation: reboot.metal3.io or reboot.metal3.io/<suffix> (not a look-alike such as
// reboot.metal3.io.example/x).
func isRebootAnnotation(key string) bool {
	return key == metal3.RebootAnnotationPrefix || strings.HasPrefix(key, metal3.RebootAnnotationPrefix+"/")
}

// validateRebootAnnotation refuses what metal3 refuses (a value that is not JSON, an unknown
// mode); unknown fields are accepted there, so they are only warned about here
// (annotationWarnings).
func validateRebootAnnotation(value string, path *field.Path) field.ErrorList {
	if value == "" {
		return nil
	}
	var args metal3.RebootAnnotationArguments
	if err := json.Unmarshal([]byte(value), &args); err != nil {
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("must be %s: %v", rebootForm, err))}
	}
	if !slices.Contains(rebootModes, args.Mode) {
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("mode %q is not allowed: use %s", args.Mode, quoteAll(rebootModes[1:]...)))}
	}
	return nil
}

// validateDetachedAnnotation refuses only an unknown deleteAction in a JSON value. metal3 does
// not check this annotation and its controller (like ours, detachedArgs) takes a value that is
// not a JSON object for the defaults; clients write such values (assisted-service's BMAC wrote
// "assisted-service-controller"), so they are accepted with a warning.
func validateDetachedAnnotation(value string, path *field.Path) field.ErrorList {
	var args metal3.DetachedAnnotationArguments
	if value == "" || json.Unmarshal([]byte(value), &args) != nil {
		return nil
	}
	if !slices.Contains(detachedActions, args.DeleteAction) {
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("deleteAction %q is not allowed: use %s (delete when omitted)", args.DeleteAction, quoteAll(detachedActions[1:]...)))}
	}
	return nil
}

// annotationWarnings are what the host controller will not read as written, in the reboot and
// detached annotations that newHost adds or changes (oldHost nil on create): accepted, as metal3
// accepts them, but said back to whoever wrote them (kubectl prints admission warnings), so a
// typo such as "forse" does not go unnoticed.
func annotationWarnings(oldHost, newHost *metal3.BareMetalHost) []string {
	var warnings []string
	for key, value := range newHost.Annotations {
		if oldHost != nil {
			if old, ok := oldHost.Annotations[key]; ok && old == value {
				continue
			}
		}
		var form string
		var args any
		switch {
		case isRebootAnnotation(key):
			form, args = rebootForm, &metal3.RebootAnnotationArguments{}
		case key == metal3.DetachedAnnotation:
			form, args = detachedForm, &metal3.DetachedAnnotationArguments{}
		default:
			continue
		}
		if strings.TrimSpace(value) == "" {
			continue
		}
		if err := decodeStrict(value, args); err != nil {
			warnings = append(warnings, fmt.Sprintf("metadata.annotations[%s]: %v: the host controller reads %s, and the defaults for the rest", key, err, form))
		}
	}
	slices.Sort(warnings)
	return warnings
}

func validateHardwareDetailsAnnotation(value string, inspectionDisabled bool, path *field.Path) field.ErrorList {
	if value == "" {
		return nil
	}
	var errs field.ErrorList
	if !inspectionDisabled {
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"only allowed when inspection is disabled (spec.inspectionMode: disabled, or the annotation %s: disabled): otherwise inspection overwrites the details",
			metal3.InspectAnnotationPrefix)))
	}
	var details metal3.HardwareDetails
	if err := decodeStrict(value, &details); err != nil {
		// The value can be long; the error says where it is wrong.
		errs = append(errs, field.Invalid(path, field.OmitValueType{}, "must be a JSON HardwareDetails object (the shape of status.hardware): "+err.Error()))
	}
	return errs
}

func validateStatusAnnotation(value string, path *field.Path) field.ErrorList {
	if value == "" {
		return nil
	}
	var status metal3.BareMetalHostStatus
	if err := decodeStrict(value, &status); err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "must be a JSON BareMetalHostStatus object (the shape of status): "+err.Error())}
	}
	var errs field.ErrorList
	if !slices.Contains(statusAnnotationOperationalStatuses, status.OperationalStatus) {
		errs = append(errs, field.Invalid(path, field.OmitValueType{}, fmt.Sprintf(
			"operationalStatus %q is not allowed: use %s", status.OperationalStatus, quoteAll(statusAnnotationOperationalStatuses...))))
	}
	if !slices.Contains(statusAnnotationErrorTypes, status.ErrorType) {
		errs = append(errs, field.Invalid(path, field.OmitValueType{}, fmt.Sprintf(
			"errorType %q is not allowed: use %s", status.ErrorType, quoteAll(statusAnnotationErrorTypes...))))
	}
	return errs
}

// decodeStrict decodes exactly one JSON object into out, refusing unknown fields and anything
// after the object.
func decodeStrict(value string, out any) error {
	if !strings.HasPrefix(strings.TrimSpace(value), "{") {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}
