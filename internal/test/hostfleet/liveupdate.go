package hostfleet

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// The live update workflow of metal3's design (drain, edit the host's HostFirmwareSettings, add the
// reboot annotation, wait for servicing → OK), one host at a time, for the programs that run it on
// a rack (test/bench/servicing, test/chaos).

// AllowLiveSettings creates the host's HostUpdatePolicy allowing firmware settings on reboot; an
// existing one is left as it is.
func AllowLiveSettings(ctx context.Context, c client.Client, namespace, name string) error {
	policy := &metal3.HostUpdatePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: metal3.HostUpdatePolicySpec{FirmwareSettings: metal3.HostUpdatePolicyOnReboot}}
	if err := c.Create(ctx, policy); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the HostUpdatePolicy of %s: %w", name, err)
	}
	return nil
}

// SetFirmwareSetting asks for one BIOS setting in the host's HostFirmwareSettings with a JSON merge
// patch (no read, no conflict; the other settings asked for stay).
func SetFirmwareSetting(ctx context.Context, c client.Client, namespace, name, setting, value string) error {
	hfs := &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	body := fmt.Sprintf(`{"spec":{"settings":{%q:%q}}}`, setting, value)
	if err := c.Patch(ctx, hfs, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		return fmt.Errorf("setting %s in the HostFirmwareSettings of %s: %w", setting, name, err)
	}
	return nil
}

// ChangeJudged reports whether the HostFirmwareSettings controller found the current spec a valid
// change: ChangeDetected and Valid True for the current generation. The host acts on a change only
// then; a reboot before it is a plain reboot.
func ChangeJudged(hfs *metal3.HostFirmwareSettings) bool {
	n := 0
	for _, t := range []metal3.SettingsConditionType{metal3.FirmwareSettingsChangeDetected, metal3.FirmwareSettingsValid} {
		if c := meta.FindStatusCondition(hfs.Status.Conditions, string(t)); c != nil && c.ObservedGeneration == hfs.Generation && c.Status == metav1.ConditionTrue {
			n++
		}
	}
	return n == 2
}

// Reboot adds the reboot annotation (metal3's one-shot `reboot.metal3.io`) with a JSON merge patch.
func Reboot(ctx context.Context, c client.Client, namespace, name string) error {
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, metal3.RebootAnnotationPrefix)
	if err := c.Patch(ctx, h, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		return fmt.Errorf("adding the reboot annotation to %s: %w", name, err)
	}
	return nil
}
