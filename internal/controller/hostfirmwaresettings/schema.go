package hostfirmwaresettings

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// A FirmwareSchema is content-addressed: its name is a hash of the schema it holds, so every host
// whose firmware reports the same schema (the same hardware model and firmware) names the same
// object, and a schema that changes (new firmware) names a new one. The object is written once, by
// whichever host needs it first, and never updated but once: nothing in its schema can change
// without its name changing, and the hardware vendor and model (informative) are filled in once
// when the host that created it was not inspected yet (see fillHardware). It carries no owner references (metal3 adds one per HostFirmwareSettings, and so
// rewrites the shared object once per host: 2.5–3.3 writes per host at 1000 hosts, the API
// server's main cost); the schema cleaner (cleanup.go) deletes it once no HostFirmwareSettings of
// its namespace names it.

// schemaNamePrefix starts every FirmwareSchema name, as in metal3.
const schemaNamePrefix = "schema-"

// schemaName is the FirmwareSchema name for a schema: a SHA-256 of its canonical JSON (encoding/json
// writes map keys sorted), 16 hex digits (64 bits: a collision among a cluster's schemas is not a
// practical concern).
func schemaName(schema map[string]metal3.SettingSchema) string {
	b, err := json.Marshal(schema)
	if err != nil {
		// Plain data (strings, ints, bools): cannot fail.
		panic(fmt.Sprintf("encoding a firmware schema: %v", err))
	}
	sum := sha256.Sum256(b)
	return schemaNamePrefix + hex.EncodeToString(sum[:8])
}

// publishedSchema is the schema as FirmwareSchemas hold it: without password settings, which are
// neither shown nor settable.
func publishedSchema(schema map[string]metal3.SettingSchema) map[string]metal3.SettingSchema {
	out := make(map[string]metal3.SettingSchema, len(schema))
	for name, s := range schema {
		if !isPassword(name, s) {
			out[name] = s
		}
	}
	return out
}

// schemas creates FirmwareSchemas, at most once per name per grace period (Config.SchemaGrace). Hosts of one hardware
// model reconciled together would otherwise all find the new schema missing from the cache (which
// shows it a moment after its creation) and send one create each, answered "already exists".
type schemas struct {
	client client.Client
	now    func() time.Time
	grace  time.Duration // Config.SchemaGrace

	mu      sync.Mutex
	created map[types.NamespacedName]stampAt
	// filled are the schemas this process gave their vendor and model (the cache may show the
	// schema without them for a moment: every host of that hardware would send the same patch).
	filled map[types.NamespacedName]bool
}

// stampAt is when a schema was last created or found for a host, and whether it was created (a
// create the cache does not show yet is not sent again; a schema only found, and gone since, is).
type stampAt struct {
	at      time.Time
	created bool
}

// ensure makes sure the FirmwareSchema key exists, creating it with build() when it does not, and
// gives an existing one without hardware vendor and model those of build() (fillHardware).
func (s *schemas) ensure(ctx context.Context, key types.NamespacedName, build func() *metal3.FirmwareSchema) error {
	existing := &metal3.FirmwareSchema{}
	err := s.client.Get(ctx, key, existing)
	if err == nil {
		// Used now, by a host whose status may name it only after the cleaner, having found no
		// user, would delete it: it waits a grace period (recentlyCreated) and looks again.
		s.mu.Lock()
		s.stamp(key, s.now(), false)
		s.mu.Unlock()
		return s.fillHardware(ctx, existing, build().Spec)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading firmware schema %s: %w", key, err)
	}
	now := s.now()
	s.mu.Lock()
	if st, ok := s.created[key]; ok && st.created && now.Sub(st.at) < s.grace {
		s.mu.Unlock()
		return nil // created a moment ago; the cache does not show it yet
	}
	s.stamp(key, now, true)
	s.mu.Unlock()

	fs := build()
	fs.Name, fs.Namespace = key.Name, key.Namespace
	if err := s.client.Create(ctx, fs); err != nil && !apierrors.IsAlreadyExists(err) {
		s.forget(key)
		return fmt.Errorf("creating firmware schema %s: %w", key, err)
	}
	return nil
}

// fillHardware gives a schema created before any host using it was inspected (hosts are
// registered, and their settings read, before inspection) the vendor and model of a host that is
// inspected now: one patch per schema, never per host. A schema that names hardware already is
// left alone (hosts of one schema are one model; the first to say so is kept).
func (s *schemas) fillHardware(ctx context.Context, fs *metal3.FirmwareSchema, want metal3.FirmwareSchemaSpec) error {
	if fs.Spec.HardwareVendor != "" || fs.Spec.HardwareModel != "" || (want.HardwareVendor == "" && want.HardwareModel == "") {
		return nil
	}
	key := client.ObjectKeyFromObject(fs)
	s.mu.Lock()
	done := s.filled[key]
	if !done {
		if s.filled == nil {
			s.filled = map[types.NamespacedName]bool{}
		}
		s.filled[key] = true
	}
	s.mu.Unlock()
	if done {
		return nil
	}
	base := fs.DeepCopy()
	fs.Spec.HardwareVendor, fs.Spec.HardwareModel = want.HardwareVendor, want.HardwareModel
	if err := s.client.Patch(ctx, fs, client.MergeFrom(base)); err != nil {
		s.mu.Lock()
		delete(s.filled, key)
		s.mu.Unlock()
		if apierrors.IsNotFound(err) {
			return nil // deleted since (the cleaner): the next reconcile creates it again
		}
		return fmt.Errorf("naming the hardware of firmware schema %s: %w", key, err)
	}
	return nil
}

// stamp records that the schema was created (or found) for a host at now; s.mu is held.
func (s *schemas) stamp(key types.NamespacedName, now time.Time, created bool) {
	if s.created == nil {
		s.created = map[types.NamespacedName]stampAt{}
	}
	s.created[key] = stampAt{at: now, created: created}
}

// forget drops the memory of a schema's creation (it was deleted, or creating it failed).
func (s *schemas) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.created, key)
	delete(s.filled, key)
}

// recentlyCreated reports whether this process created the schema, or found it for a host, within
// the grace period.
func (s *schemas) recentlyCreated(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.created[key]
	return ok && s.now().Sub(st.at) < s.grace
}

// newSchema is the FirmwareSchema object for a published schema, with the host's vendor and model
// when its inspected hardware has them (as metal3, from the host's status.hardware, which the
// host cache keeps them in).
func newSchema(schema map[string]metal3.SettingSchema, host *metal3.BareMetalHost) *metal3.FirmwareSchema {
	fs := &metal3.FirmwareSchema{ObjectMeta: metav1.ObjectMeta{}, Spec: metal3.FirmwareSchemaSpec{Schema: schema}}
	if hw := host.Status.HardwareDetails; hw != nil {
		fs.Spec.HardwareVendor = hw.SystemVendor.Manufacturer
		fs.Spec.HardwareModel = hw.SystemVendor.ProductName
	}
	return fs
}
