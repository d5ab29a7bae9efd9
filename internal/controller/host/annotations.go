package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// guards run before every handler, in this order: deletion, detaching, registration, the agent
// image (a state that boots the agent waits for it).
func (s *hostScope) guards() (outcome, bool) {
	if out, ok := s.checkDeletion(); ok {
		return out, true
	}
	if out, ok := s.checkDetached(); ok {
		return out, true
	}
	if out, ok := s.ensureRegistered(); ok {
		return out, true
	}
	return s.awaitImage(s.state())
}

// detachedArgs parses the detached annotation. A value that is not a JSON object counts as the
// defaults, as in metal3 (the webhook accepts it with a warning; clients write their name there).
func (s *hostScope) detachedArgs() (metal3.DetachedAnnotationArguments, bool) {
	var args metal3.DetachedAnnotationArguments
	v, ok := s.host.Annotations[metal3.DetachedAnnotation]
	if !ok {
		return args, false
	}
	if strings.TrimSpace(v) != "" {
		if err := json.Unmarshal([]byte(v), &args); err != nil {
			// Unmarshal keeps the fields it could decode around the one it could not: a
			// value with a mistyped field ({"deleteAction":"delay","force":"true"}) counts as
			// the defaults as a whole, not half (metal3 does not delay then either).
			args = metal3.DetachedAnnotationArguments{}
		}
	}
	return args, true
}

// rebootRequest summarises the reboot annotations still on the host.
type rebootRequest struct {
	// oneShot: the plain reboot.metal3.io annotation, removed once the host is off.
	oneShot bool
	// held: a suffixed annotation keeps the host off until its owner removes it.
	held  bool
	mode  metal3.RebootMode
	force bool
	// forcedOneShot: the one-shot annotation says "force": a host waiting for its agent
	// (inspection, deployment) boots it again. Only the one-shot one, removed once the engine took
	// it: a held one, kept until its owner removes it, would restart the operation at every look.
	forcedOneShot bool
}

func (r rebootRequest) any() bool { return r.oneShot || r.held }

// rebootRequests reads reboot.metal3.io and reboot.metal3.io/<suffix>; any hard one wins, the
// default is soft.
func (s *hostScope) rebootRequests() rebootRequest {
	return s.rebootRequestsOf(false)
}

// rebootRequestsOf is rebootRequests counting, with forcedOnly, the annotations that say
// "force": true only: a host that is not provisioned takes only those (metal3: "normal reboots
// only work in provisioned states"; a plain one would power-cycle an available host's agent).
func (s *hostScope) rebootRequestsOf(forcedOnly bool) rebootRequest {
	r := rebootRequest{mode: metal3.RebootModeSoft}
	for key, value := range s.host.Annotations {
		if s.fx.removeAnnotations[key] {
			continue
		}
		oneShot := key == metal3.RebootAnnotationPrefix
		if !oneShot && !strings.HasPrefix(key, metal3.RebootAnnotationPrefix+"/") {
			continue
		}
		var args metal3.RebootAnnotationArguments
		if strings.TrimSpace(value) != "" && json.Unmarshal([]byte(value), &args) != nil {
			args = metal3.RebootAnnotationArguments{}
		}
		if forcedOnly && !args.Force {
			continue
		}
		if oneShot {
			r.oneShot = true
		} else {
			r.held = true
		}
		if args.Mode == metal3.RebootModeHard {
			r.mode = metal3.RebootModeHard
		}
		r.force = r.force || args.Force
		r.forcedOneShot = r.forcedOneShot || (args.Force && oneShot)
	}
	return r
}

// consumeHardwareDetails takes inspect.metal3.io/hardwaredetails into status.hardware (and the
// HardwareData) when inspection is disabled or nothing was inspected yet, and always removes it.
func (s *hostScope) consumeHardwareDetails() {
	v, ok := s.host.Annotations[metal3.HardwareDetailsAnnotation]
	if !ok {
		return
	}
	s.removeAnnotation(metal3.HardwareDetailsAnnotation)
	if strings.TrimSpace(v) == "" {
		// Nothing given (metal3 takes it as no details, and the webhook lets it through): no
		// change, and no warning about a decoding error the user did not make.
		return
	}
	if !s.host.InspectionDisabled() && s.host.Status.HardwareDetails != nil {
		s.event(eventNormal, reasonHardwareDetails, "Annotation",
			"Ignored the hardwaredetails annotation: the host is inspected")
		return
	}
	hw, err := decodeHardwareDetails(v)
	if err != nil {
		s.event(eventWarning, reasonBadAnnotation, "Annotation", err.Error())
		return
	}
	s.setHardware(hw)
	s.event(eventNormal, reasonHardwareDetails, "Annotation", "Hardware details set from the hardwaredetails annotation")
}

func decodeHardwareDetails(v string) (*metal3.HardwareDetails, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	hw := &metal3.HardwareDetails{}
	if err := dec.Decode(hw); err != nil {
		return nil, fmt.Errorf("annotation %s: invalid hardware details: %w", metal3.HardwareDetailsAnnotation, err)
	}
	return hw, nil
}

// restoreStatus rebuilds an empty status from the status annotation (written by tools that move
// hosts between clusters). It reports whether the status was restored; a malformed annotation is
// an error naming it.
func restoreStatus(host *metal3.BareMetalHost) (bool, error) {
	v, ok := host.Annotations[metal3.StatusAnnotation]
	if !ok || host.Status.LastUpdated != nil {
		return false, nil
	}
	var st metal3.BareMetalHostStatus
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return false, fmt.Errorf("annotation %s: invalid status: %w", metal3.StatusAnnotation, err)
	}
	host.Status = st
	return true, nil
}
