package server

import "slices"

// IndicatorLEDs are the accepted IndicatorLED values.
var IndicatorLEDs = []string{"Lit", "Blinking", "Off"}

// SystemPatch is a PATCH of the ComputerSystem; nil fields are left alone.
type SystemPatch struct {
	Boot         BootPatch
	IndicatorLED *string
	AssetTag     *string
}

// BootPatch is a PATCH of the System's Boot object; nil fields are left alone.
type BootPatch struct {
	Target      *string
	Enabled     *string
	Mode        *string
	HTTPBootURI *string
}

// PatchSystem checks the whole patch, then applies all of it under one lock once pre accepts the
// state: like a BMC, a PATCH with one bad value changes nothing, not even the valid ones before it.
func (s *Server) PatchSystem(p SystemPatch, pre Precondition) error {
	if err := p.check(); err != nil {
		return err
	}
	return s.updateIf(pre, func(st *State) (bool, error) {
		b := st.Boot
		if p.Boot.Target != nil {
			b.Target = *p.Boot.Target
		}
		if p.Boot.Enabled != nil {
			b.Enabled = *p.Boot.Enabled
		}
		if p.Boot.Mode != nil {
			if *p.Boot.Mode != "UEFI" && st.SecureBoot {
				return false, invalid("boot mode Legacy needs secure boot disabled")
			}
			b.Mode = *p.Boot.Mode
		}
		if p.Boot.HTTPBootURI != nil {
			b.HTTPBootURI = *p.Boot.HTTPBootURI
		}
		led, tag := st.IndicatorLED, st.AssetTag
		if p.IndicatorLED != nil {
			led = *p.IndicatorLED
		}
		if p.AssetTag != nil {
			tag = *p.AssetTag
		}
		changed := b != st.Boot || led != st.IndicatorLED || tag != st.AssetTag
		st.Boot, st.IndicatorLED, st.AssetTag = b, led, tag
		return changed, nil
	})
}

// check validates what does not depend on the state.
func (p SystemPatch) check() error {
	if v := p.Boot.Target; v != nil && !slices.Contains(BootTargets, *v) {
		return invalid("BootSourceOverrideTarget %q is not one of %v", *v, BootTargets)
	}
	if v := p.Boot.Enabled; v != nil && !slices.Contains(BootEnabledValues, *v) {
		return invalid("BootSourceOverrideEnabled %q is not one of %v", *v, BootEnabledValues)
	}
	if v := p.Boot.Mode; v != nil && !slices.Contains(BootModes, *v) {
		return invalid("BootSourceOverrideMode %q is not one of %v", *v, BootModes)
	}
	if v := p.IndicatorLED; v != nil && !slices.Contains(IndicatorLEDs, *v) {
		return invalid("IndicatorLED %q is not one of %v", *v, IndicatorLEDs)
	}
	return nil
}
