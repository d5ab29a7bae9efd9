package server

import (
	"context"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Firmware components (FirmwareInventory ids).
const (
	ComponentBIOS = "BIOS"
	ComponentBMC  = "BMC"
	ComponentNIC  = "NIC"
)

// Components lists them in FirmwareInventory order.
var Components = []string{ComponentBIOS, ComponentBMC, ComponentNIC}

// UpdateRequest is a #UpdateService.SimpleUpdate.
type UpdateRequest struct {
	ImageURI         string
	TransferProtocol string
	Targets          []string
	// TargetURI is the action URI, recorded in the task payload.
	TargetURI string
}

// SimpleUpdate starts a firmware update and returns its task id. The BMC downloads the image at
// once. A BIOS or NIC update is activated on the next reset of the server (a reset during the
// download activates it when the download ends); a BMC update activates itself BMCUpdateTime
// after the download, as a BMC flashes and restarts itself (or earlier on a reset).
//
// The component comes from Targets (a FirmwareInventory member, the Manager, the System or a
// NetworkAdapter), else from the image file name (bmc, nic, else BIOS). The new version comes from
// a version= query parameter, else from the last dotted number in the file name, else the current
// version with its last number increased.
func (s *Server) SimpleUpdate(req UpdateRequest) (string, error) {
	u, err := url.Parse(req.ImageURI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", invalid("ImageURI %q is not an http or https URL", req.ImageURI)
	}
	if p := strings.ToUpper(req.TransferProtocol); p != "" && p != "HTTP" && p != "HTTPS" {
		return "", invalid("TransferProtocol %q is not supported (HTTP, HTTPS)", req.TransferProtocol)
	}
	component, err := s.componentFor(req.Targets, u)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	version := versionFrom(u, s.versionLocked(component))
	t := s.newTaskLocked("Firmware update of "+component, req.TargetURI, "POST")
	t.Messages = append(t.Messages, TaskMessage{ID: "Update.1.0.TransferringToComponent", Severity: StatusOK,
		Args: []string{req.ImageURI, component}, Message: "Image '" + req.ImageURI + "' is being transferred to '" + component + "'."})
	id := t.ID
	s.st.Jobs = append(s.st.Jobs, Job{TaskID: id, Kind: "firmware", Component: component, ImageURI: req.ImageURI, Version: version})
	s.mu.Unlock()
	s.fleet.markDirty()
	s.download(id, req.ImageURI)
	return id, nil
}

// download fetches the firmware image in the background, as the BMC would, and leaves the job
// waiting for a reset, or fails the task when the image cannot be fetched.
func (s *Server) download(taskID, image string) {
	s.fleet.workers.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := s.fleet.checkImage(ctx, image, false)
		cancel()
		s.update(func(st *State) bool {
			for i := range st.Jobs {
				if st.Jobs[i].TaskID != taskID {
					continue
				}
				if err != nil {
					st.Jobs = append(st.Jobs[:i], st.Jobs[i+1:]...)
					s.finishTaskLocked(taskID, TaskException, StatusCritical, TaskMessage{
						ID: "Update.1.0.TransferFailed", Severity: StatusCritical, Args: []string{image},
						Message: "Transfer of image '" + image + "' failed: " + err.Error(),
					})
					return true
				}
				st.Jobs[i].Downloaded = true
				j := st.Jobs[i]
				bmcNow := j.Component == ComponentBMC && s.fleet.cfg.BMCUpdateTime.Duration <= 0
				if j.ResetSeen || bmcNow {
					st.Jobs = append(st.Jobs[:i], st.Jobs[i+1:]...)
					s.applyFirmwareLocked(j)
					return true
				}
				t := s.taskLocked(taskID)
				if t != nil {
					t.Percent = 50
				}
				if j.Component == ComponentBMC {
					if t != nil {
						t.Messages = append(t.Messages, TaskMessage{ID: "Update.1.0.InstallingOnComponent", Severity: StatusOK,
							Args: []string{image, ComponentBMC}, Message: "Image '" + image + "' is being installed on 'BMC'; the BMC restarts when done."})
					}
					s.scheduleBMCActivation(taskID)
					return true
				}
				if t != nil {
					t.State = TaskStarting
					t.Messages = append(t.Messages, TaskMessage{ID: "Update.1.0.AwaitToActivate", Severity: StatusOK,
						Args: []string{image, "ForceRestart"}, Message: "Awaiting a reset to activate image '" + image + "'."})
				}
				return true
			}
			return false
		})
	})
}

func (s *Server) componentFor(targets []string, u *url.URL) (string, error) {
	// SimpleUpdate names one target (Ironic sends one per update); the first decides.
	if len(targets) > 0 {
		t := strings.TrimSuffix(targets[0], "/")
		switch {
		case t == "/redfish/v1/Managers/"+s.id:
			return ComponentBMC, nil
		case t == "/redfish/v1/Systems/"+s.id:
			return ComponentBIOS, nil
		case strings.HasPrefix(t, "/redfish/v1/Chassis/"+s.id+"/NetworkAdapters/"):
			return ComponentNIC, nil
		case strings.HasPrefix(t, "/redfish/v1/UpdateService/FirmwareInventory/"):
			c := strings.TrimPrefix(t, "/redfish/v1/UpdateService/FirmwareInventory/")
			for _, known := range Components {
				if c == known {
					return c, nil
				}
			}
		}
		return "", invalid("update target %q is not a component of this server", t)
	}
	name := strings.ToLower(path.Base(u.Path))
	switch {
	case strings.Contains(name, "bmc"):
		return ComponentBMC, nil
	case strings.Contains(name, "nic"):
		return ComponentNIC, nil
	}
	return ComponentBIOS, nil
}

var dottedVersion = regexp.MustCompile(`[0-9]+(?:\.[0-9]+)+`)

func versionFrom(u *url.URL, current string) string {
	if v := u.Query().Get("version"); v != "" {
		return v
	}
	if m := dottedVersion.FindAllString(path.Base(u.Path), -1); len(m) > 0 {
		return m[len(m)-1]
	}
	return bump(current)
}

// bump increases the last number in a version string ("1.0.9" → "1.0.10").
func bump(v string) string {
	end := strings.LastIndexFunc(v, func(r rune) bool { return r >= '0' && r <= '9' })
	if end < 0 {
		return v + ".1"
	}
	start := end
	for start > 0 && v[start-1] >= '0' && v[start-1] <= '9' {
		start--
	}
	n, err := strconv.Atoi(v[start : end+1])
	if err != nil {
		return v + ".1"
	}
	return v[:start] + strconv.Itoa(n+1) + v[end+1:]
}

func (s *Server) versionLocked(component string) string {
	switch component {
	case ComponentBMC:
		return s.st.Firmware.BMC
	case ComponentNIC:
		return s.st.Firmware.NIC
	}
	return s.st.Firmware.BIOS
}

func (s *Server) setVersionLocked(component, v string) {
	switch component {
	case ComponentBMC:
		s.st.Firmware.BMC = v
	case ComponentNIC:
		s.st.Firmware.NIC = v
	default:
		s.st.Firmware.BIOS = v
	}
}

// ManagerReset reboots the BMC, which activates a downloaded BMC firmware update.
func (s *Server) ManagerReset() {
	s.update(func(st *State) bool {
		s.applyOnResetLocked(true)
		return true
	})
}

// scheduleBMCActivation activates a downloaded BMC update after the configured flash time: a BMC
// updates and restarts itself, and Ironic waits for Manager.FirmwareVersion to change instead of
// rebooting the host. (A host reset or a Manager.Reset before that activates it at once.)
func (s *Server) scheduleBMCActivation(taskID string) {
	time.AfterFunc(s.fleet.cfg.BMCUpdateTime.Duration, func() {
		s.update(func(st *State) bool {
			for i, j := range st.Jobs {
				if j.TaskID == taskID && j.Downloaded {
					st.Jobs = append(st.Jobs[:i], st.Jobs[i+1:]...)
					s.applyFirmwareLocked(j)
					return true
				}
			}
			return false
		})
	})
}
