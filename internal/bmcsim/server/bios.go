package server

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// biosDefaults are the registry defaults with the profile's overrides.
func biosDefaults(p *config.Profile) map[string]any {
	d := make(map[string]any, len(config.BIOSAttributes))
	for _, a := range config.BIOSAttributes {
		d[a.Name] = a.Default
	}
	d["SystemModelName"] = p.Model
	if p.BootMode == "Legacy" {
		d["BootMode"] = "Bios"
	}
	maps.Copy(d, p.BIOS)
	return d
}

// BIOSAttributes returns the current attributes (defaults overlaid with what was applied). Call it
// inside View.
func (s *Server) BIOSAttributes(st *State) map[string]any {
	attrs := maps.Clone(s.fleet.biosDefaults)
	maps.Copy(attrs, st.BIOS)
	return attrs
}

// SetPendingBIOS records attribute values to apply on the next boot, as a PATCH to the BIOS
// settings object does. Values accumulate until the boot applies them.
func (s *Server) SetPendingBIOS(attrs map[string]any) error {
	if len(attrs) == 0 {
		return invalid("Attributes must not be empty")
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a, ok := config.BIOSAttributeByName(name)
		if !ok {
			return invalid("BIOS attribute %s is unknown", name)
		}
		if a.ReadOnly {
			return invalid("BIOS attribute %s is read-only", name)
		}
		if err := a.Check(attrs[name]); err != nil {
			return fmt.Errorf("%w: BIOS attribute %s: %w", ErrInvalid, name, err)
		}
		if s.fleet.Faults.For(s.Name).RejectBIOSSetting == name {
			return invalid("BIOS attribute %s cannot be changed on this system", name)
		}
	}
	s.update(func(st *State) bool {
		if st.PendingBIOS == nil {
			st.PendingBIOS = map[string]any{}
		}
		maps.Copy(st.PendingBIOS, attrs)
		return true
	})
	return nil
}

// ResetBIOS schedules every attribute back to its default on the next boot (#Bios.ResetBios).
func (s *Server) ResetBIOS() {
	s.update(func(st *State) bool {
		st.PendingBIOS = maps.Clone(s.fleet.biosDefaults)
		delete(st.PendingBIOS, "SystemModelName")
		return true
	})
}

func (s *Server) applyBIOSLocked() {
	if len(s.st.PendingBIOS) == 0 {
		return
	}
	for k, v := range s.st.PendingBIOS {
		if reflect.DeepEqual(s.fleet.biosDefaults[k], v) {
			delete(s.st.BIOS, k)
			continue
		}
		if s.st.BIOS == nil {
			s.st.BIOS = map[string]any{}
		}
		s.st.BIOS[k] = v
	}
	s.st.PendingBIOS = nil
	s.st.BIOSApplies++
}

// SetSecureBoot enables or disables UEFI secure boot; SecureBootCurrentBoot follows on the next boot.
func (s *Server) SetSecureBoot(enable bool) error {
	var err error
	s.update(func(st *State) bool {
		if enable && st.Boot.Mode != "UEFI" {
			err = invalid("secure boot needs UEFI boot mode")
			return false
		}
		changed := st.SecureBoot != enable
		st.SecureBoot = enable
		return changed
	})
	return err
}

// BootPatch is a PATCH of the System's Boot object; nil fields are left alone.
type BootPatch struct {
	Target      *string
	Enabled     *string
	Mode        *string
	HTTPBootURI *string
}

// PatchBoot changes the boot override.
func (s *Server) PatchBoot(p BootPatch) error {
	if p.Target != nil && !slices.Contains(BootTargets, *p.Target) {
		return invalid("BootSourceOverrideTarget %q is not one of %v", *p.Target, BootTargets)
	}
	if p.Enabled != nil && !slices.Contains(BootEnabledValues, *p.Enabled) {
		return invalid("BootSourceOverrideEnabled %q is not one of %v", *p.Enabled, BootEnabledValues)
	}
	if p.Mode != nil && !slices.Contains(BootModes, *p.Mode) {
		return invalid("BootSourceOverrideMode %q is not one of %v", *p.Mode, BootModes)
	}
	var err error
	s.update(func(st *State) bool {
		b := st.Boot
		if p.Target != nil {
			b.Target = *p.Target
		}
		if p.Enabled != nil {
			b.Enabled = *p.Enabled
		}
		if p.Mode != nil {
			if *p.Mode != "UEFI" && st.SecureBoot {
				err = invalid("boot mode Legacy needs secure boot disabled")
				return false
			}
			b.Mode = *p.Mode
		}
		if p.HTTPBootURI != nil {
			b.HTTPBootURI = *p.HTTPBootURI
		}
		changed := b != st.Boot
		st.Boot = b
		return changed
	})
	return err
}

// SetIndicatorLED sets IndicatorLED (Lit, Blinking, Off).
func (s *Server) SetIndicatorLED(v string) error {
	if v != "Lit" && v != "Blinking" && v != "Off" {
		return invalid("IndicatorLED %q is not one of Lit, Blinking, Off", v)
	}
	s.update(func(st *State) bool {
		changed := st.IndicatorLED != v
		st.IndicatorLED = v
		return changed
	})
	return nil
}

// BIOSDefaults returns the default attribute values (the registry's DefaultValue).
func (f *Fleet) BIOSDefaults() map[string]any { return maps.Clone(f.biosDefaults) }

// PendingBIOS returns a copy of the settings waiting for the next boot.
func (s *Server) PendingBIOS() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.PendingBIOS)
}
