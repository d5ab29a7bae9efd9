package host

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// loadFirmwareChanges reads the host's HostFirmwareSettings and HostFirmwareComponents (same
// name) when they exist, and keeps the changes their controller found valid for preparing.
// Creating them (and the shared FirmwareSchema) is the firmware controller's job, not ours.
func (r *Reconciler) loadFirmwareChanges(ctx context.Context, s *hostScope) error {
	key := types.NamespacedName{Namespace: s.host.Namespace, Name: s.host.Name}
	hfs := &metal3.HostFirmwareSettings{}
	switch err := r.Client.Get(ctx, key, hfs); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading host firmware settings %s: %w", key, err)
	case changeReady(hfs.Status.Conditions, string(metal3.FirmwareSettingsChangeDetected), string(metal3.FirmwareSettingsValid), hfs.Generation):
		for name, want := range hfs.Spec.Settings {
			if hfs.Status.Settings[name] != want.String() {
				if s.in.firmwareSettings == nil {
					s.in.firmwareSettings = metal3.DesiredSettingsMap{}
				}
				s.in.firmwareSettings[name] = want
			}
		}
	}
	hfc := &metal3.HostFirmwareComponents{}
	switch err := r.Client.Get(ctx, key, hfc); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading host firmware components %s: %w", key, err)
	case changeReady(hfc.Status.Conditions, string(metal3.HostFirmwareComponentsChangeDetected), string(metal3.HostFirmwareComponentsValid), hfc.Generation):
		for _, u := range hfc.Spec.Updates {
			if !slices.Contains(hfc.Status.Updates, u) {
				s.in.firmwareUpdates = append(s.in.firmwareUpdates, u)
			}
		}
	}
	return nil
}

// changeReady: a change was detected and found valid for the current generation.
func changeReady(conds []metav1.Condition, changed, valid string, generation int64) bool {
	c, v := meta.FindStatusCondition(conds, changed), meta.FindStatusCondition(conds, valid)
	return c != nil && v != nil && c.Status == metav1.ConditionTrue && v.Status == metav1.ConditionTrue &&
		c.ObservedGeneration == generation && v.ObservedGeneration == generation
}
