package host

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/companion"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/events"
)

// firmwareInputs are the host's pending firmware changes, as its HostFirmwareSettings and
// HostFirmwareComponents (same name; created and checked by their own controllers) say.
type firmwareInputs struct {
	// settings and updates are the changes found valid for the current generation and not yet
	// on the host.
	settings metal3.DesiredSettingsMap
	updates  []metal3.FirmwareUpdate
	// specUpdates is HostFirmwareComponents' spec.updates as read, recorded as status.updates
	// once the pending ones are applied; nil without a HostFirmwareComponents.
	specUpdates []metal3.FirmwareUpdate
	// statusUpdates is its status.updates as read: the updates recorded applied.
	statusUpdates []metal3.FirmwareUpdate
	// uncheckedSettings / uncheckedUpdates: the spec asks for something its controller has not
	// judged yet (conditions of an older generation, or none). The host waits rather than act on
	// half of what the user asked: applying without it, or aborting a servicing because the
	// changes look gone, would lose the change.
	uncheckedSettings, uncheckedUpdates bool
	// invalidSettings / invalidUpdates: their controller judged the current spec invalid (Valid
	// False), so nothing of it is pending: a live update under way is aborted, and says why.
	invalidSettings, invalidUpdates bool
	// settingsChanged and updatesChanged are the objects' status.lastUpdated (zero without one):
	// their status last changed then (a spec edit judged, or new values read).
	settingsChanged, updatesChanged time.Time
}

// updatePolicy is what the host's HostUpdatePolicy (same name) allows on reboot of a provisioned
// host; both false without one (metal3's default: updates only while preparing).
type updatePolicy struct {
	settings, updates bool
	// policy is the object when it still needs the host's owner reference (metal3 adds one on
	// access, so that the policy goes with its host).
	adopt *metal3.HostUpdatePolicy
}

// loadFirmwareChanges reads the host's HostFirmwareSettings and HostFirmwareComponents (same name)
// when they exist, and keeps the changes their controllers found valid.
func (r *Reconciler) loadFirmwareChanges(ctx context.Context, s *hostScope) error {
	key := types.NamespacedName{Namespace: s.host.Namespace, Name: s.host.Name}
	fw := &s.in.firmware
	// Both are only read here (what is kept is copied out): no copies of the cache's objects.
	hfs := &metal3.HostFirmwareSettings{}
	switch err := r.Client.Get(ctx, key, hfs, cacheview.ReadOnly); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading host firmware settings %s: %w", key, err)
	default:
		switch ready, judged, invalid := changeReady(hfs.Status.Conditions, string(metal3.FirmwareSettingsChangeDetected), string(metal3.FirmwareSettingsValid), hfs.Generation); {
		case !judged && len(hfs.Spec.Settings) > 0:
			fw.uncheckedSettings = true
		case invalid:
			fw.invalidSettings = true
		case ready:
			schema, err := r.settingTypes(ctx, hfs)
			if err != nil {
				return err
			}
			fw.settings = hfs.PendingSettings(schema)
		}
		if hfs.Status.LastUpdated != nil {
			fw.settingsChanged = hfs.Status.LastUpdated.Time
		}
	}
	hfc := &metal3.HostFirmwareComponents{}
	switch err := r.Client.Get(ctx, key, hfc, cacheview.ReadOnly); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading host firmware components %s: %w", key, err)
	default:
		fw.specUpdates = append([]metal3.FirmwareUpdate{}, hfc.Spec.Updates...)
		fw.statusUpdates = slices.Clone(hfc.Status.Updates)
		switch ready, judged, invalid := changeReady(hfc.Status.Conditions, string(metal3.HostFirmwareComponentsChangeDetected), string(metal3.HostFirmwareComponentsValid), hfc.Generation); {
		case !judged && len(hfc.Spec.Updates) > 0:
			fw.uncheckedUpdates = true
		case invalid:
			fw.invalidUpdates = true
		case ready:
			fw.updates = hfc.PendingUpdates()
		}
		if hfc.Status.LastUpdated != nil {
			fw.updatesChanged = hfc.Status.LastUpdated.Time
		}
	}
	return nil
}

// settingTypes is the schema of the host's settings, from the FirmwareSchema its
// HostFirmwareSettings names (nil without one): what tells a String "0042" from the Integer 42
// when deciding which settings differ, as the settings controller did. The manager caches
// FirmwareSchemas without their schema (hostfirmwaresettings.CacheViews): the cache gives the
// object's resourceVersion, and the schema is read from the API once per version and remembered
// (every host with a valid change pending needs it at every reconcile; a fleet shares a few).
func (r *Reconciler) settingTypes(ctx context.Context, hfs *metal3.HostFirmwareSettings) (map[string]metal3.SettingSchema, error) {
	ref := hfs.Status.FirmwareSchema
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = hfs.Namespace
	}
	cached := &metal3.FirmwareSchema{}
	if err := r.Client.Get(ctx, key, cached, cacheview.ReadOnly); err == nil {
		if known, ok := r.schemas.get(key, cached.ResourceVersion); ok {
			return known, nil
		}
	}
	schema := &metal3.FirmwareSchema{}
	switch err := r.APIReader.Get(ctx, key, schema); {
	case apierrors.IsNotFound(err):
		// Being recreated (the settings controller names it before it exists in the cache):
		// compared as settings of unknown type until then.
		r.schemas.forget(key)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading firmware schema %s: %w", key, err)
	}
	r.schemas.put(key, schema.ResourceVersion, schema.Spec.Schema)
	return schema.Spec.Schema, nil
}

// schemaMemory is the settings schema of each FirmwareSchema read, by its resourceVersion (a new
// version is read again). The maps are only read.
type schemaMemory struct {
	m sync.Map // types.NamespacedName → versionedSchema
}

type versionedSchema struct {
	version string
	schema  map[string]metal3.SettingSchema
}

func (m *schemaMemory) get(key types.NamespacedName, version string) (map[string]metal3.SettingSchema, bool) {
	v, ok := m.m.Load(key)
	if !ok || version == "" || v.(versionedSchema).version != version {
		return nil, false
	}
	return v.(versionedSchema).schema, true
}

func (m *schemaMemory) put(key types.NamespacedName, version string, schema map[string]metal3.SettingSchema) {
	m.m.Store(key, versionedSchema{version: version, schema: schema})
}

func (m *schemaMemory) forget(key types.NamespacedName) { m.m.Delete(key) }

// changeReady: a change was detected and found valid (ready); judged: both conditions were
// computed for the current generation; invalid: judged, and Valid is not True.
func changeReady(conds []metav1.Condition, changed, valid string, generation int64) (ready, judged, invalid bool) {
	c, v := conditions.Get(conds, changed), conditions.Get(conds, valid)
	judged = c != nil && v != nil && c.ObservedGeneration == generation && v.ObservedGeneration == generation
	invalid = judged && v.Status != metav1.ConditionTrue
	return judged && c.Status == metav1.ConditionTrue && !invalid, judged, invalid
}

// loadUpdatePolicy reads the host's HostUpdatePolicy (same name), if any.
func (r *Reconciler) loadUpdatePolicy(ctx context.Context, s *hostScope) error {
	key := types.NamespacedName{Namespace: s.host.Namespace, Name: s.host.Name}
	policy := &metal3.HostUpdatePolicy{}
	if err := r.Client.Get(ctx, key, policy); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading host update policy %s: %w", key, err)
	}
	s.in.policy = updatePolicy{
		settings: policy.Spec.FirmwareSettings == metal3.HostUpdatePolicyOnReboot,
		updates:  policy.Spec.FirmwareUpdates == metal3.HostUpdatePolicyOnReboot,
	}
	if !slices.ContainsFunc(policy.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == s.host.UID }) {
		s.in.policy.adopt = policy
	}
	return nil
}

// adoptPolicy gives the HostUpdatePolicy an owner reference to its host (not a controller one),
// so that it is deleted with the host, as metal3 does. The owner references are a list, so the
// patch is guarded by the resourceVersion; a conflict (the cached policy is older than our own
// last patch, or someone changed it) is left to the next reconcile, which reads it again.
func (r *Reconciler) adoptPolicy(ctx context.Context, host *metal3.BareMetalHost, policy *metal3.HostUpdatePolicy) error {
	patch := client.MergeFromWithOptions(policy.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := controllerutil.SetOwnerReference(host, policy, r.Client.Scheme()); err != nil {
		return fmt.Errorf("owning host update policy %s/%s: %w", policy.Namespace, policy.Name, err)
	}
	err := r.Client.Patch(ctx, policy, patch)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("owning host update policy %s/%s: %w", policy.Namespace, policy.Name, err)
	}
	return nil
}

// policyWithoutHost warns about a HostUpdatePolicy a user created under a name no host has (a
// typo would otherwise leave the live updates it means to allow silently off; its status has no
// fields to say so). The reconcile of a missing host runs when such a policy is created or edited
// (hostOfPolicy) and when a host is deleted; a policy its host owns goes with that host.
func (r *Reconciler) policyWithoutHost(ctx context.Context, key types.NamespacedName) error {
	policy := &metal3.HostUpdatePolicy{}
	if err := r.Client.Get(ctx, key, policy); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading host update policy %s: %w", key, err)
	}
	if !policy.DeletionTimestamp.IsZero() || companion.OwnedByHost(policy) {
		return nil
	}
	var list events.List
	list.Warning(companion.ReasonNoHost, "Validate", companion.NoHostMessage("HostUpdatePolicy", policy))
	list.Emit(r.Recorder, policy)
	return nil
}

// hostOfPolicy wakes the host of a HostUpdatePolicy's name: the policy is taken into account (and
// owned) at once rather than at the host's next poll. Watching the kind also starts its informer
// with the manager, so the host controller's reads of it never wait for a first sync.
func hostOfPolicy(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// recordAppliedUpdates writes HostFirmwareComponents' status.updates once preparing or servicing
// applied its updates: the applied list is the spec as read (the pending ones plus those applied
// before). A merge patch of that one field: the HostFirmwareComponents controller writes the rest
// of the status, and this write wakes it to read the new versions.
func (r *Reconciler) recordAppliedUpdates(ctx context.Context, host *metal3.BareMetalHost, updates []metal3.FirmwareUpdate) error {
	data, err := json.Marshal(map[string]any{"status": map[string]any{"updates": updates}})
	if err != nil {
		return fmt.Errorf("encoding applied firmware updates: %w", err)
	}
	hfc := &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: host.Namespace, Name: host.Name}}
	if err := r.Client.Status().Patch(ctx, hfc, client.RawPatch(types.MergePatchType, data)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recording applied firmware updates in host firmware components %s/%s: %w", host.Namespace, host.Name, err)
	}
	return nil
}

// firmwareVerdictChanged passes HostFirmwareSettings/Components updates whose verdict changed:
// the status, reason or generation of their conditions (a change was judged, found valid or
// invalid, applied, or taken back). Their other status writes (versions read again) do not matter
// to the host.
func firmwareVerdictChanged() predicate.Funcs {
	verdict := func(o any) []metav1.Condition {
		var conds []metav1.Condition
		switch obj := o.(type) {
		case *metal3.HostFirmwareSettings:
			conds = obj.Status.Conditions
		case *metal3.HostFirmwareComponents:
			conds = obj.Status.Conditions
		}
		out := make([]metav1.Condition, len(conds))
		for i, c := range conds {
			out[i] = metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, ObservedGeneration: c.ObservedGeneration}
		}
		return out
	}
	return predicate.Funcs{
		CreateFunc: func(ctrlevent.CreateEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			return !reflect.DeepEqual(verdict(e.ObjectOld), verdict(e.ObjectNew))
		},
	}
}

// hostWaitingOnFirmware wakes the host of the same name when the verdict can change what it does:
// it waits in preparing, is servicing (or failed to), or may start a live update.
func (r *Reconciler) hostWaitingOnFirmware(ctx context.Context, o client.Object) []reconcile.Request {
	host := &metal3.BareMetalHost{}
	key := client.ObjectKeyFromObject(o)
	if err := r.Client.Get(ctx, key, host, cacheview.ReadOnly); err != nil {
		return nil
	}
	row := stateOf(host.Status.Provisioning.State)
	st := host.Status
	if row.mayPrepare.is() || (row.liveUpdates.is() && (st.OperationalStatus == metal3.OperationalStatusServicing ||
		st.ErrorType == metal3.ServicingError || companion.HasRebootAnnotation(host))) {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}
