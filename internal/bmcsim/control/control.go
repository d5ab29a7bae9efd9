// Package control serves bmcsim's control endpoint: a small JSON API on a separate loopback port to
// inspect servers and change fault injection at runtime. docs/bmcsim.md documents it.
package control

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// Summary is a server as GET /v1/servers lists it.
type Summary struct {
	Name      string       `json:"name"`
	ID        string       `json:"id"`
	BootMAC   string       `json:"bootMACAddress"`
	Power     string       `json:"power"`
	Booted    string       `json:"booted,omitempty"`
	Boot      server.Boot  `json:"boot"`
	Cd        server.Media `json:"cd"`
	DiskImage string       `json:"diskImage,omitempty"`
	// DiskWrites counts the images written to the server's disk since it was created.
	DiskWrites int `json:"diskWrites"`
	// BIOSApplies counts the boots that applied pending BIOS settings since it was created.
	BIOSApplies int             `json:"biosApplies"`
	Firmware    server.Versions `json:"firmware"`
	Faults      fault.Set       `json:"faults"`
}

// Detail is a server with its whole state, as GET /v1/servers/{name} returns it.
type Detail struct {
	Summary
	State server.State `json:"state"`
}

// New returns the control API handler.
func New(f *server.Fleet) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /v1/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, f.Faults.Snapshot())
	})
	mux.HandleFunc("PUT /v1/faults", func(w http.ResponseWriter, r *http.Request) {
		var set fault.Set
		if !readJSON(w, r, &set) {
			return
		}
		if err := f.Faults.SetGlobal(set); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, f.Faults.Snapshot())
	})
	mux.HandleFunc("DELETE /v1/faults", func(w http.ResponseWriter, _ *http.Request) {
		f.Faults.Clear()
		writeJSON(w, http.StatusOK, f.Faults.Snapshot())
	})
	mux.HandleFunc("GET /v1/servers", func(w http.ResponseWriter, _ *http.Request) {
		out := make([]Summary, 0, len(f.Servers))
		for _, s := range f.Servers {
			out = append(out, summary(f, s, s.Snapshot()))
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /v1/servers/{name}", func(w http.ResponseWriter, r *http.Request) {
		if s := lookup(w, f, r); s != nil {
			writeDetail(w, f, s)
		}
	})
	mux.HandleFunc("POST /v1/servers/{name}/factory-reset", func(w http.ResponseWriter, r *http.Request) {
		if s := lookup(w, f, r); s != nil {
			s.FactoryReset()
			writeDetail(w, f, s)
		}
	})
	mux.HandleFunc("GET /v1/servers/{name}/faults", func(w http.ResponseWriter, r *http.Request) {
		if s := lookup(w, f, r); s != nil {
			writeJSON(w, http.StatusOK, f.Faults.Snapshot().Servers[s.Name])
		}
	})
	mux.HandleFunc("PUT /v1/servers/{name}/faults", func(w http.ResponseWriter, r *http.Request) {
		s := lookup(w, f, r)
		if s == nil {
			return
		}
		var set fault.Set
		if !readJSON(w, r, &set) {
			return
		}
		if err := f.Faults.SetServer(s.Name, set); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, set)
	})
	mux.HandleFunc("DELETE /v1/servers/{name}/faults", func(w http.ResponseWriter, r *http.Request) {
		if s := lookup(w, f, r); s != nil {
			_ = f.Faults.SetServer(s.Name, fault.Set{})
			writeJSON(w, http.StatusOK, fault.Set{})
		}
	})
	return mux
}

// writeDetail answers with the server's whole state.
func writeDetail(w http.ResponseWriter, f *server.Fleet, s *server.Server) {
	st := s.Snapshot()
	writeJSON(w, http.StatusOK, Detail{Summary: summary(f, s, st), State: st})
}

func summary(f *server.Fleet, s *server.Server, st server.State) Summary {
	return Summary{
		Name: s.Name, ID: s.ID(), BootMAC: s.BootMAC(), Power: st.Power, Booted: st.Booted, Boot: st.Boot,
		Cd: st.Media[server.MediaCd], DiskImage: st.DiskImage, DiskWrites: st.DiskWrites, BIOSApplies: st.BIOSApplies, Firmware: st.Firmware, Faults: f.Faults.For(s.Name),
	}
}

func lookup(w http.ResponseWriter, f *server.Fleet, r *http.Request) *server.Server {
	s := f.Lookup(r.PathValue("name"))
	if s == nil {
		writeError(w, http.StatusNotFound, errors.New("no server is named "+r.PathValue("name")))
	}
	return s
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, errors.New("invalid JSON body: "+strings.TrimPrefix(err.Error(), "json: ")))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
