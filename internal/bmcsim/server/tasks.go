package server

import (
	"slices"
	"strconv"
	"time"
)

// Task states and statuses (Redfish TaskState / TaskStatus values).
const (
	TaskNew     = "New"
	TaskRunning = "Running"
	// TaskStarting: the image is staged and the update waits for a reset to start, as BMCs
	// report it (iDRAC's scheduled jobs). Ironic 39 tells the two apart for NICs: Running is
	// waited on to complete, Starting for 30 s, then the node is rebooted (redfish/firmware.py
	// _handle_nic_task_starting); a NIC update reported Running waited for ever.
	TaskStarting  = "Starting"
	TaskCompleted = "Completed"
	TaskException = "Exception"

	StatusOK       = "OK"
	StatusWarning  = "Warning"
	StatusCritical = "Critical"
)

// maxTasks bounds the task history per server; the oldest finished tasks go first.
const maxTasks = 32

// Task is an asynchronous operation: a firmware update or a volume change applied on reset.
type Task struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	State    string        `json:"state"`
	Status   string        `json:"status"`
	Percent  int           `json:"percent"`
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end,omitzero"`
	Messages []TaskMessage `json:"messages,omitempty"`
	// TargetURI and Method are the request that started the task (Task.Payload).
	TargetURI string `json:"targetUri"`
	Method    string `json:"method"`
}

// TaskMessage is one message of a task, in the Redfish Task message registry.
type TaskMessage struct {
	ID       string   `json:"id"`
	Message  string   `json:"message"`
	Severity string   `json:"severity"`
	Args     []string `json:"args,omitempty"`
}

// Done reports whether the task finished.
func (t *Task) Done() bool { return t.State == TaskCompleted || t.State == TaskException }

// Job is work waiting for a reset (or, for firmware, first for its download).
type Job struct {
	TaskID string `json:"taskId"`
	// Kind is firmware, createVolume or deleteVolume.
	Kind       string `json:"kind"`
	Component  string `json:"component,omitempty"`
	ImageURI   string `json:"imageUri,omitempty"`
	Version    string `json:"version,omitempty"`
	Downloaded bool   `json:"downloaded,omitempty"`
	// ResetSeen records a reset while the image was still downloading.
	ResetSeen bool    `json:"resetSeen,omitempty"`
	Volume    *Volume `json:"volume,omitempty"`
	VolumeID  string  `json:"volumeId,omitempty"`
}

func (s *Server) newTaskLocked(name, targetURI, method string) *Task {
	id := strconv.Itoa(s.st.NextTask)
	s.st.NextTask++
	if len(s.st.Tasks) >= maxTasks {
		if i := slices.IndexFunc(s.st.Tasks, func(t Task) bool { return t.Done() }); i >= 0 {
			s.st.Tasks = slices.Delete(s.st.Tasks, i, i+1)
		}
	}
	s.st.Tasks = append(s.st.Tasks, Task{
		ID: id, Name: name, State: TaskRunning, Status: StatusOK, Start: s.now(),
		TargetURI: targetURI, Method: method,
	})
	return &s.st.Tasks[len(s.st.Tasks)-1]
}

func (s *Server) taskLocked(id string) *Task {
	for i := range s.st.Tasks {
		if s.st.Tasks[i].ID == id {
			return &s.st.Tasks[i]
		}
	}
	return nil
}

func (s *Server) finishTaskLocked(id, state, status string, msg TaskMessage) {
	t := s.taskLocked(id)
	if t == nil {
		return
	}
	t.State, t.Status, t.End = state, status, s.now()
	if state == TaskCompleted {
		t.Percent = 100
	}
	t.Messages = append(t.Messages, msg)
}

// Task returns a copy of one task.
func (s *Server) Task(id string) (Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.taskLocked(id)
	if t == nil {
		return Task{}, false
	}
	c := *t
	c.Messages = slices.Clone(t.Messages)
	return c, true
}

// applyOnResetLocked completes what waits for a reset: pending BIOS settings, downloaded firmware
// updates and OnReset volume operations. A BMC reset (bmcOnly) only activates BMC firmware.
func (s *Server) applyOnResetLocked(bmcOnly bool) {
	if !bmcOnly {
		s.applyBIOSLocked()
	}
	var keep []Job
	for _, j := range s.st.Jobs {
		switch {
		case j.Kind == "firmware" && (!bmcOnly || j.Component == ComponentBMC):
			if !j.Downloaded {
				// Ironic reboots right after SimpleUpdate, often before the BMC has the image:
				// the update then activates as soon as the download ends.
				j.ResetSeen = true
				keep = append(keep, j)
				continue
			}
			s.applyFirmwareLocked(j)
		case j.Kind == "createVolume" && !bmcOnly:
			s.st.Volumes = append(s.st.Volumes, *j.Volume)
			s.finishTaskLocked(j.TaskID, TaskCompleted, StatusOK, TaskMessage{
				ID: "Base.1.18.Created", Severity: StatusOK, Message: "The resource was created: volume " + j.Volume.ID + ".",
			})
		case j.Kind == "deleteVolume" && !bmcOnly:
			s.st.Volumes = slices.DeleteFunc(s.st.Volumes, func(v Volume) bool { return v.ID == j.VolumeID })
			s.finishTaskLocked(j.TaskID, TaskCompleted, StatusOK, TaskMessage{
				ID: "Base.1.18.ResourceRemoved", Severity: StatusOK, Message: "The resource was removed: volume " + j.VolumeID + ".",
			})
		default:
			keep = append(keep, j)
		}
	}
	s.st.Jobs = keep
}

// applyFirmwareLocked activates a downloaded firmware update (or fails it under the
// FailFirmwareUpdate fault) and ends its task.
func (s *Server) applyFirmwareLocked(j Job) {
	if s.fleet.Faults.For(s.Name).FailFirmwareUpdate {
		s.finishTaskLocked(j.TaskID, TaskException, StatusCritical, TaskMessage{
			ID: "Update.1.0.ApplyFailed", Severity: StatusCritical, Args: []string{j.ImageURI, j.Component},
			Message: "Installing or applying the image '" + j.ImageURI + "' to '" + j.Component + "' failed (injected fault).",
		})
		return
	}
	s.setVersionLocked(j.Component, j.Version)
	s.finishTaskLocked(j.TaskID, TaskCompleted, StatusOK, TaskMessage{
		ID: "Update.1.0.UpdateSuccessful", Severity: StatusOK, Args: []string{j.Component, j.ImageURI},
		Message: "Device '" + j.Component + "' successfully updated with image '" + j.ImageURI + "'; version " + j.Version + ".",
	})
}
