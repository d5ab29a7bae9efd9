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
func (s *Server) SetPendingBIOS(attrs map[string]any, pre Precondition) error {
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
	return s.updateIf(pre, func(st *State) (bool, error) {
		if st.PendingBIOS == nil {
			st.PendingBIOS = map[string]any{}
		}
		maps.Copy(st.PendingBIOS, attrs)
		return true, nil
	})
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
func (s *Server) SetSecureBoot(enable bool, pre Precondition) error {
	return s.updateIf(pre, func(st *State) (bool, error) {
		if enable && st.Boot.Mode != "UEFI" {
			return false, invalid("secure boot needs UEFI boot mode")
		}
		changed := st.SecureBoot != enable
		st.SecureBoot = enable
		return changed, nil
	})
}

// BIOSDefaults returns the default attribute values (the registry's DefaultValue).
func (f *Fleet) BIOSDefaults() map[string]any { return maps.Clone(f.biosDefaults) }

// PendingBIOS returns a copy of the settings waiting for the next boot.
func (s *Server) PendingBIOS() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.st.PendingBIOS)
}
