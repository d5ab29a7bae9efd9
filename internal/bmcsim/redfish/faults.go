package redfish

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// maxBody bounds the request bodies the service reads.
const maxBody = 1 << 20

// injectFault rolls the faults of the server a call is for and, when one hits, answers 500 or
// drops the call; it reports whether the call goes on.
func (svc *Service) injectFault(w http.ResponseWriter, r *http.Request, p *principal) bool {
	name := ""
	if s := svc.addressee(r, p); s != nil {
		name = s.Name
	}
	switch fault.Roll(svc.fleet.Faults.For(name)) {
	case fault.Error:
		q := &request{svc: svc, w: w, r: r}
		q.error(http.StatusInternalServerError, "InternalError", "The request failed due to an internal service error (injected fault).")
		return false
	case fault.Hang:
		// Go watches for the client hanging up only once the body was read to its end: unread, a
		// POST or PATCH would hold its goroutine and socket (and the server's shutdown) for all of
		// HangFor after the client gave up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(svc.opts.HangFor):
		}
		// Drop the connection without an answer, as a wedged BMC does.
		panic(http.ErrAbortHandler)
	}
	return true
}

// addressee is the server a call is for, whose faults it gets: the caller's; else the one its
// credentials name even when they are not valid (a BMC that is down fails whatever it is sent);
// else, for a login, the one the body names, as sushy opens a session before anything else. A call
// without credentials (the service root) is for no server: the BMCs share the listener.
func (svc *Service) addressee(r *http.Request, p *principal) *server.Server {
	if p != nil {
		return p.srv
	}
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		if sess := svc.sessions.lookup(tok); sess != nil {
			return sess.srv
		}
		return nil
	}
	if user, _, ok := r.BasicAuth(); ok {
		return svc.fleet.ByName(user)
	}
	if r.Method == http.MethodPost && r.URL.Path == sessionsPath {
		return svc.fleet.ByName(peekUserName(r))
	}
	return nil
}

// peekUserName reads the UserName of a login body and puts the body back for the handler.
func peekUserName(r *http.Request) string {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(data), r.Body), r.Body}
	if err != nil {
		return ""
	}
	var body struct{ UserName string }
	if json.Unmarshal(data, &body) != nil {
		return ""
	}
	return body.UserName
}
