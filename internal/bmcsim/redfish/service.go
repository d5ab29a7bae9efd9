// Package redfish serves the Redfish API of every server in a bmcsim fleet on one listener.
//
// How servers share the listener: each server has its own credentials (the user name is the server
// name), and everything a client sees is scoped to the server it authenticated as. The Systems,
// Managers and Chassis collections hold that server's one member (its id is the server's UUID), and
// the singletons — SessionService, UpdateService, TaskService, EventService — are that server's.
// A BMC address /redfish/v1/Systems/<id> plus the server's credentials therefore select exactly one
// server, and a client cannot tell the shared listener from a rack of BMCs. The service root,
// /redfish and /redfish/v1/odata are public, as the Redfish specification requires.
package redfish

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// Options tune the service.
type Options struct {
	// Latency is added to every answer.
	Latency time.Duration
	// SessionTimeout expires idle sessions (default 30 minutes).
	SessionTimeout time.Duration
	// HangFor bounds how long a call hit by the timeout fault stays unanswered (default 10 minutes)
	// when the client does not give up first.
	HangFor time.Duration
	Logger  *slog.Logger
}

// Service is the Redfish API of a fleet.
type Service struct {
	fleet    *server.Fleet
	opts     Options
	mux      *http.ServeMux
	sessions *sessionStore
	log      *slog.Logger
}

// M is a JSON object.
type M = map[string]any

// New builds the service.
func New(f *server.Fleet, opts Options) *Service {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.HangFor <= 0 {
		opts.HangFor = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	svc := &Service{fleet: f, opts: opts, mux: http.NewServeMux(), log: opts.Logger}
	svc.sessions = newSessionStore(opts.SessionTimeout)
	svc.routes()
	return svc
}

// request is one call being served.
type request struct {
	svc  *Service
	w    http.ResponseWriter
	r    *http.Request
	srv  *server.Server // the server the caller authenticated as; nil on public paths
	sess *session       // the session used, if any
}

type principalKey struct{}

type principal struct {
	srv  *server.Server
	sess *session
}

// route registers a handler. Public handlers run without credentials.
func (svc *Service) route(pattern string, public bool, h func(q *request)) {
	svc.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, _ := r.Context().Value(principalKey{}).(*principal)
		q := &request{svc: svc, w: w, r: r}
		if p != nil {
			q.srv, q.sess = p.srv, p.sess
		}
		if !public && q.srv == nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="bmcsim"`)
			q.error(http.StatusUnauthorized, "NoValidSession", "There is no valid session established with the implementation.")
			return
		}
		h(q)
	})
}

// ServeHTTP logs the call at debug level (method, path, caller, status, duration; never
// credentials or bodies) and serves it.
func (svc *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !svc.log.Enabled(r.Context(), slog.LevelDebug) {
		svc.serve(w, r)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		user := "-"
		if u, _, ok := r.BasicAuth(); ok {
			user = u
		} else if r.Header.Get("X-Auth-Token") != "" {
			user = "(session)"
		}
		svc.log.Debug("Redfish", "method", r.Method, "path", r.URL.Path, "user", user, "status", sw.status, "duration", time.Since(start))
	}()
	svc.serve(sw, r)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// serve adds latency, resolves the caller, injects faults and dispatches.
func (svc *Service) serve(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r.URL.Path = strings.TrimRight(p, "/")
		r.URL.RawPath = ""
	}
	if svc.opts.Latency > 0 {
		select {
		case <-time.After(svc.opts.Latency):
		case <-r.Context().Done():
			return
		}
	}
	p := svc.authenticate(r)
	if !svc.injectFault(w, r, p) {
		return
	}
	if p != nil {
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
	}
	// Handler only finds the route; ServeHTTP (which matches again) also sets the path values.
	if _, pattern := svc.mux.Handler(r); pattern == "" {
		svc.notFoundOrMethod(w, r)
		return
	}
	svc.mux.ServeHTTP(w, r)
}

// authenticate resolves the caller from X-Auth-Token or basic auth; nil when neither is valid.
// With the wrong-credentials fault a server rejects its real password and its sessions; with the
// password fault it takes only that password, and only sessions opened with it.
func (svc *Service) authenticate(r *http.Request) *principal {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		sess := svc.sessions.lookup(tok)
		if sess == nil {
			return nil
		}
		f := svc.fleet.Faults.For(sess.srv.Name)
		if f.WrongCredentials || sess.password != currentPassword(sess.srv, f) {
			return nil
		}
		return &principal{srv: sess.srv, sess: sess}
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return nil
	}
	if s := svc.checkPassword(user, pass); s != nil {
		return &principal{srv: s}
	}
	return nil
}

func (svc *Service) checkPassword(user, pass string) *server.Server {
	s := svc.fleet.ByName(user)
	if s == nil {
		return nil
	}
	f := svc.fleet.Faults.For(s.Name)
	if f.WrongCredentials || subtle.ConstantTimeCompare([]byte(pass), []byte(currentPassword(s, f))) != 1 {
		return nil
	}
	return s
}

// currentPassword is the server's password under its faults: the changed one, else its own.
func currentPassword(s *server.Server, f fault.Set) string {
	if f.Password != "" {
		return f.Password
	}
	return s.Password
}

// notFoundOrMethod answers a path no route matched: 405 when the path exists for another method.
func (svc *Service) notFoundOrMethod(w http.ResponseWriter, r *http.Request) {
	q := &request{svc: svc, w: w, r: r}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pat := svc.mux.Handler(probe); pat != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		q.error(http.StatusMethodNotAllowed, "OperationNotAllowed", fmt.Sprintf("The %s method is not allowed on %s.", r.Method, r.URL.Path))
		return
	}
	q.notFound()
}

// bufPool keeps encode buffers: answers are rendered into a buffer to compute the ETag first.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render encodes a body and returns its bytes (owned by buf) and ETag.
func render(buf *bytes.Buffer, body any) ([]byte, string, error) {
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), etagOf(buf.Bytes()), nil
}

func etagOf(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return `W/"` + strconv.FormatUint(h.Sum64(), 16) + `"`
}

// ETag returns the ETag a GET of body would carry.
func ETag(body any) string {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	_, tag, err := render(buf, body)
	if err != nil {
		return ""
	}
	return tag
}

func (q *request) headers() http.Header {
	h := q.w.Header()
	h.Set("OData-Version", "4.0")
	h.Set("Cache-Control", "no-cache")
	return h
}

// json writes a resource with its ETag; a GET whose If-None-Match matches gets 304.
func (q *request) json(status int, body any) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	data, tag, err := render(buf, body)
	if err != nil {
		q.svc.log.Error("Encoding a Redfish answer failed", "path", q.r.URL.Path, "error", err)
		q.error(http.StatusInternalServerError, "InternalError", "The request failed due to an internal service error.")
		return
	}
	h := q.headers()
	h.Set("ETag", tag)
	if q.r.Method == http.MethodGet && status == http.StatusOK && etagMatches(q.r.Header.Get("If-None-Match"), tag) {
		q.w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	q.w.WriteHeader(status)
	if q.r.Method != http.MethodHead {
		_, _ = q.w.Write(data)
	}
}

func (q *request) noContent() {
	q.headers()
	q.w.WriteHeader(http.StatusNoContent)
}

// ifMatch turns If-Match into the precondition of a change (nil without If-Match): the ETag of
// the resource as render shows the state, checked under the server's lock the change applies
// under, so of two PATCHes sent with the ETag both read one applies and the other gets 412.
func (q *request) ifMatch(render func(st *server.State) M) server.Precondition {
	want := q.r.Header.Get("If-Match")
	if want == "" {
		return nil
	}
	return func(st *server.State) bool { return etagMatches(want, ETag(render(st))) }
}

// etagMatches compares an If-Match / If-None-Match list with a tag, weakly (W/ ignored): sushy
// echoes the ETag it read, and some clients strip the weak prefix.
func etagMatches(header, tag string) bool {
	if header == "" {
		return false
	}
	opaque := strings.TrimPrefix(tag, "W/")
	for c := range strings.SplitSeq(header, ",") {
		c = strings.TrimSpace(c)
		if c == "*" || strings.TrimPrefix(c, "W/") == opaque || strings.Trim(strings.TrimPrefix(c, "W/"), `"`) == strings.Trim(opaque, `"`) {
			return true
		}
	}
	return false
}

// decode reads a JSON request body into v; on failure it answers 400 and returns false. An empty
// body decodes as {} when allowEmpty.
func (q *request) decode(v any, allowEmpty bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(q.w, q.r.Body, maxBody))
	if err != nil {
		q.error(http.StatusBadRequest, "MalformedJSON", "The request body could not be read.")
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if allowEmpty {
			return true
		}
		q.error(http.StatusBadRequest, "MalformedJSON", "The request body is empty.")
		return false
	}
	if err := json.Unmarshal(data, v); err != nil {
		q.error(http.StatusBadRequest, "MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return false
	}
	return true
}

// fail maps a model error to a Redfish error answer.
func (q *request) fail(err error) {
	switch {
	case errors.Is(err, server.ErrNotFound):
		q.notFound()
	case errors.Is(err, server.ErrPrecondition):
		q.error(http.StatusPreconditionFailed, "PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.")
	case errors.Is(err, server.ErrConflict):
		q.error(http.StatusConflict, "ResourceInUse", err.Error())
	case errors.Is(err, server.ErrInvalid), errors.Is(err, server.ErrBadImage):
		q.error(http.StatusBadRequest, "GeneralError", err.Error())
	default:
		q.error(http.StatusInternalServerError, "InternalError", err.Error())
	}
}
