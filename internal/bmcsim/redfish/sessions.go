package redfish

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// maxSessionsPerServer bounds a BMC's sessions, as real BMCs do; the oldest goes first.
const maxSessionsPerServer = 16

const sessionsPath = "/redfish/v1/SessionService/Sessions"

type session struct {
	id    string
	token string
	srv   *server.Server
	// password is the one the session was opened with: a password change on the BMC (the password
	// fault) ends the sessions opened with another one.
	password string
	created  time.Time
	lastUsed time.Time
}

type sessionStore struct {
	timeout time.Duration
	mu      sync.Mutex
	byToken map[string]*session
	byID    map[string]*session
	bySrv   map[*server.Server][]*session
}

func newSessionStore(timeout time.Duration) *sessionStore {
	return &sessionStore{
		timeout: timeout,
		byToken: map[string]*session{},
		byID:    map[string]*session{},
		bySrv:   map[*server.Server][]*session{},
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (st *sessionStore) create(srv *server.Server, password string) *session {
	now := time.Now()
	s := &session{id: randomHex(8), token: randomHex(16), srv: srv, password: password, created: now, lastUsed: now}
	st.mu.Lock()
	defer st.mu.Unlock()
	list := st.bySrv[srv]
	list = slices.DeleteFunc(list, func(old *session) bool {
		if now.Sub(old.lastUsed) > st.timeout {
			st.dropLocked(old)
			return true
		}
		return false
	})
	for len(list) >= maxSessionsPerServer {
		st.dropLocked(list[0])
		list = list[1:]
	}
	st.byToken[s.token] = s
	st.byID[s.id] = s
	st.bySrv[srv] = append(list, s)
	return s
}

func (st *sessionStore) dropLocked(s *session) {
	delete(st.byToken, s.token)
	delete(st.byID, s.id)
}

// lookup returns the live session for a token and marks it used.
func (st *sessionStore) lookup(token string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byToken[token]
	if s == nil {
		return nil
	}
	now := time.Now()
	if now.Sub(s.lastUsed) > st.timeout {
		st.removeLocked(s)
		return nil
	}
	s.lastUsed = now
	return s
}

func (st *sessionStore) removeLocked(s *session) {
	st.dropLocked(s)
	st.bySrv[s.srv] = slices.DeleteFunc(st.bySrv[s.srv], func(x *session) bool { return x == s })
	if len(st.bySrv[s.srv]) == 0 {
		delete(st.bySrv, s.srv)
	}
}

// get returns a server's session by id.
func (st *sessionStore) get(srv *server.Server, id string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byID[id]
	if s == nil || s.srv != srv {
		return nil
	}
	return s
}

func (st *sessionStore) remove(srv *server.Server, id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byID[id]
	if s == nil || s.srv != srv {
		return false
	}
	st.removeLocked(s)
	return true
}

func (st *sessionStore) list(srv *server.Server) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]string, 0, len(st.bySrv[srv]))
	for _, s := range st.bySrv[srv] {
		ids = append(ids, s.id)
	}
	return ids
}

func (svc *Service) sessionRoutes() {
	svc.route("GET /redfish/v1/SessionService", false, func(q *request) {
		q.json(http.StatusOK, M{
			"@odata.id":      "/redfish/v1/SessionService",
			"@odata.type":    "#SessionService.v1_1_9.SessionService",
			"Id":             "SessionService",
			"Name":           "Session Service",
			"ServiceEnabled": true,
			"SessionTimeout": int(svc.opts.SessionTimeout / time.Second),
			"Status":         statusOK,
			"Sessions":       ref(sessionsPath),
		})
	})
	svc.route("GET "+sessionsPath, false, func(q *request) {
		ids := svc.sessions.list(q.srv)
		members := make([]string, len(ids))
		for i, id := range ids {
			members[i] = sessionsPath + "/" + id
		}
		q.json(http.StatusOK, collection(sessionsPath, "#SessionCollection.SessionCollection", "Session Collection", members))
	})
	svc.route("POST "+sessionsPath, true, func(q *request) {
		var body struct {
			UserName string
			Password string
		}
		if !q.decode(&body, false) {
			return
		}
		if body.UserName == "" || body.Password == "" {
			q.error(http.StatusBadRequest, "PropertyMissing", "The properties UserName and Password are required to create a session.", "UserName")
			return
		}
		srv := svc.checkPassword(body.UserName, body.Password)
		if srv == nil {
			q.error(http.StatusUnauthorized, "NoValidSession", "The user name or password is not valid.")
			return
		}
		s := svc.sessions.create(srv, body.Password)
		q.w.Header().Set("X-Auth-Token", s.token)
		q.w.Header().Set("Location", sessionsPath+"/"+s.id)
		q.json(http.StatusCreated, sessionBody(s))
	})
	svc.route("GET "+sessionsPath+"/{id}", false, func(q *request) {
		s := svc.sessions.get(q.srv, q.r.PathValue("id"))
		if s == nil {
			q.notFound()
			return
		}
		q.json(http.StatusOK, sessionBody(s))
	})
	svc.route("DELETE "+sessionsPath+"/{id}", false, func(q *request) {
		if !svc.sessions.remove(q.srv, q.r.PathValue("id")) {
			q.notFound()
			return
		}
		q.noContent()
	})
}

func sessionBody(s *session) M {
	return M{
		"@odata.id":   sessionsPath + "/" + s.id,
		"@odata.type": "#Session.v1_7_0.Session",
		"Id":          s.id,
		"Name":        "User Session",
		"UserName":    s.srv.Username,
		"CreatedTime": s.created.UTC().Format(time.RFC3339),
	}
}
