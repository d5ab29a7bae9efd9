package server

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// Apply times for volume operations (@Redfish.OperationApplyTime).
const (
	ApplyImmediate = "Immediate"
	ApplyOnReset   = "OnReset"
)

// VolumeRequest is a POST to the Volumes collection.
type VolumeRequest struct {
	Name          string
	RAIDType      string
	CapacityBytes int64 // 0 means as large as the drives allow
	Drives        []string
	ApplyTime     string
	TargetURI     string
}

// CreateVolume creates a RAID volume at once (Immediate, the default) or on the next reset
// (OnReset, returning a task id).
func (s *Server) CreateVolume(req VolumeRequest) (*Volume, string, error) {
	level, ok := config.RAIDLevels[req.RAIDType]
	if !ok || !slices.Contains(s.fleet.cfg.Profile.RAIDTypes, req.RAIDType) {
		return nil, "", invalid("RAIDType %q is not one of %v", req.RAIDType, s.fleet.cfg.Profile.RAIDTypes)
	}
	n := len(req.Drives)
	if n < level.MinDrives || (level.MaxDrives > 0 && n > level.MaxDrives) || (level.EvenDrives && n%2 != 0) {
		return nil, "", invalid("%s cannot be built from %d drives", req.RAIDType, n)
	}
	var smallest int64
	for i, id := range req.Drives {
		d := s.drive(id)
		if d == nil {
			return nil, "", invalid("drive %q does not exist", id)
		}
		if slices.Contains(req.Drives[:i], id) {
			return nil, "", invalid("drive %q is listed twice", id)
		}
		if smallest == 0 || d.SizeBytes < smallest {
			smallest = d.SizeBytes
		}
	}
	maxBytes := int64(level.DataDrives(n)) * smallest
	size := req.CapacityBytes
	if size == 0 {
		size = maxBytes
	}
	if size < 0 || size > maxBytes {
		return nil, "", invalid("CapacityBytes %d is more than %s over these drives offers (%d)", size, req.RAIDType, maxBytes)
	}
	if req.ApplyTime != "" && req.ApplyTime != ApplyImmediate && req.ApplyTime != ApplyOnReset {
		return nil, "", invalid("@Redfish.OperationApplyTime %q is not one of Immediate, OnReset", req.ApplyTime)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range req.Drives {
		if s.driveInUseLocked(id) {
			return nil, "", fmt.Errorf("%w: drive %s already belongs to a volume", ErrConflict, id)
		}
	}
	id := strconv.Itoa(s.st.NextVolume)
	s.st.NextVolume++
	name := req.Name
	if name == "" {
		name = "Volume " + id
	}
	v := Volume{ID: id, Name: name, RAIDType: req.RAIDType, CapacityBytes: size, Drives: slices.Clone(req.Drives)}
	defer s.fleet.markDirty()
	if req.ApplyTime == ApplyOnReset {
		t := s.newTaskLocked("Create volume "+id, req.TargetURI, "POST")
		s.st.Jobs = append(s.st.Jobs, Job{TaskID: t.ID, Kind: "createVolume", Volume: &v})
		return nil, t.ID, nil
	}
	s.st.Volumes = append(s.st.Volumes, v)
	return &v, "", nil
}

// DeleteVolume deletes a volume at once or on the next reset (returning a task id), once pre (nil:
// none) accepts the state.
func (s *Server) DeleteVolume(id, applyTime, targetURI string, pre Precondition) (string, error) {
	if applyTime != "" && applyTime != ApplyImmediate && applyTime != ApplyOnReset {
		return "", invalid("@Redfish.OperationApplyTime %q is not one of Immediate, OnReset", applyTime)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.st.Volumes, func(v Volume) bool { return v.ID == id })
	if i < 0 {
		return "", fmt.Errorf("%w: volume %s", ErrNotFound, id)
	}
	if pre != nil && !pre(&s.st) {
		return "", ErrPrecondition
	}
	defer s.fleet.markDirty()
	if applyTime == ApplyOnReset {
		t := s.newTaskLocked("Delete volume "+id, targetURI, "DELETE")
		s.st.Jobs = append(s.st.Jobs, Job{TaskID: t.ID, Kind: "deleteVolume", VolumeID: id})
		return t.ID, nil
	}
	s.st.Volumes = slices.Delete(s.st.Volumes, i, i+1)
	return "", nil
}

func (s *Server) drive(id string) *Drive {
	for i := range s.HW.Drives {
		if s.HW.Drives[i].ID == id {
			return &s.HW.Drives[i]
		}
	}
	return nil
}

// Drive returns a drive by id.
func (s *Server) Drive(id string) (Drive, bool) {
	d := s.drive(id)
	if d == nil {
		return Drive{}, false
	}
	return *d, true
}

func (s *Server) driveInUseLocked(id string) bool {
	for _, v := range s.st.Volumes {
		if slices.Contains(v.Drives, id) {
			return true
		}
	}
	for _, j := range s.st.Jobs {
		if j.Kind == "createVolume" && slices.Contains(j.Volume.Drives, id) {
			return true
		}
	}
	return false
}
