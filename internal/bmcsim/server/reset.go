package server

// FactoryReset returns the server to the state it was created in: off, BIOS at its defaults with
// nothing pending, factory firmware, secure boot off, no volumes, jobs, subscriptions or media, no
// boot override, a blank disk. A test pool hands a server to the next test this way: a BIOS value
// or firmware version an earlier test left would otherwise make the next test's change a no-op.
//
// The life counters (diskWrites, biosApplies) and the task and volume numbering go on, so a count
// taken before the reset still compares; tasks whose work the reset drops end in Exception, so
// whoever polls them stops waiting. Subscriptions are numbered from 1 again, as real BMCs do after
// a reset to their defaults: the first made afterwards takes the Id of one made before, which a
// client that recorded it must not take for its own.
func (s *Server) FactoryReset() {
	s.mu.Lock()
	var stop *runOp
	if s.st.Power == PowerOn {
		op := s.powerOffLocked()
		stop = &op
	}
	for _, j := range s.st.Jobs {
		s.finishTaskLocked(j.TaskID, TaskException, StatusCritical, TaskMessage{
			ID: "TaskEvent.1.0.TaskCancelled", Severity: StatusCritical, Args: []string{j.TaskID},
			Message: "The task with Id '" + j.TaskID + "' has been cancelled by a factory reset of the server.",
		})
	}
	fresh := initialState(&s.fleet.cfg.Profile)
	fresh.DiskWrites, fresh.BIOSApplies = s.st.DiskWrites, s.st.BIOSApplies
	fresh.NextVolume, fresh.NextTask = s.st.NextVolume, s.st.NextTask
	fresh.Tasks = s.st.Tasks
	s.st = fresh
	s.mu.Unlock()
	s.fleet.markDirty()
	if stop != nil {
		s.enqueue(*stop)
	}
}
