package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// stateFile is the --state file: every server's State by name.
type stateFile struct {
	Version int              `json:"version"`
	Servers map[string]State `json:"servers"`
}

const stateVersion = 1

// Save writes every server's state to path atomically (temporary file, fsync, rename).
func (f *Fleet) Save(path string) error {
	sf := stateFile{Version: stateVersion, Servers: make(map[string]State, len(f.Servers))}
	for _, s := range f.Servers {
		sf.Servers[s.Name] = s.Snapshot()
	}
	data, err := json.Marshal(sf)
	if err != nil {
		return fmt.Errorf("encoding bmcsim state: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("saving bmcsim state: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("saving bmcsim state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("saving bmcsim state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving bmcsim state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("saving bmcsim state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable; not every filesystem supports it
		d.Close()
	}
	return nil
}

// Load restores servers' state from path, before the fleet serves anything. A missing file is not
// an error (first start). Servers the file does not know keep their initial state; entries for
// servers that no longer exist are ignored. It returns how many servers were restored.
func (f *Fleet) Load(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading bmcsim state: %w", err)
	}
	var sf stateFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return 0, fmt.Errorf("parsing bmcsim state %s: %w", path, err)
	}
	if sf.Version != stateVersion {
		return 0, fmt.Errorf("bmcsim state %s has version %d, want %d", path, sf.Version, stateVersion)
	}
	n := 0
	for name, st := range sf.Servers {
		s := f.byName[name]
		if s == nil {
			f.log.Warn("Saved state names a server that does not exist; ignoring it", "server", name)
			continue
		}
		normalize(&st, &f.cfg.Profile.BootMode)
		s.mu.Lock()
		s.st = st
		s.mu.Unlock()
		n++
	}
	return n, nil
}

// normalize fills what an older or hand-edited state file may lack.
func normalize(st *State, bootMode *string) {
	if st.Power != PowerOn {
		st.Power = PowerOff
	}
	if st.Boot.Target == "" {
		st.Boot.Target = TargetNone
	}
	if st.Boot.Enabled == "" {
		st.Boot.Enabled = BootDisabled
	}
	if st.Boot.Mode == "" {
		st.Boot.Mode = *bootMode
	}
	if st.IndicatorLED == "" {
		st.IndicatorLED = "Off"
	}
	if st.Media == nil {
		st.Media = map[string]Media{}
	}
	for _, d := range MediaDevices {
		if _, ok := st.Media[d]; !ok {
			st.Media[d] = Media{WriteProtected: true}
		}
	}
	st.NextVolume = max(st.NextVolume, 1)
	st.NextTask = max(st.NextTask, 1)
	st.NextSub = max(st.NextSub, 1)
}

// Resume restarts the agents of servers that were running one when the state was saved, the
// downloads of firmware updates that had not finished and the BMC updates being flashed.
func (f *Fleet) Resume() {
	for _, s := range f.Servers {
		s.resume()
		s.mu.Lock()
		var pending, flashing []Job
		for _, j := range s.st.Jobs {
			switch {
			case j.Kind == "firmware" && !j.Downloaded:
				pending = append(pending, j)
			case j.Kind == "firmware" && j.Component == ComponentBMC:
				flashing = append(flashing, j)
			}
		}
		s.mu.Unlock()
		for _, j := range pending {
			s.download(j.TaskID, j.ImageURI)
		}
		for _, j := range flashing {
			s.scheduleBMCActivation(j.TaskID)
		}
	}
}

// Persist saves the state to path after every change (coalescing changes within debounce) until
// ctx ends, then saves a last time.
func (f *Fleet) Persist(ctx context.Context, path string, debounce time.Duration) error {
	for {
		select {
		case <-ctx.Done():
			return f.Save(path)
		case <-f.dirty:
		}
		select {
		case <-ctx.Done():
			return f.Save(path)
		case <-time.After(debounce):
		}
		if err := f.Save(path); err != nil {
			f.log.Error("Saving state failed", "path", path, "error", err)
		}
	}
}
