package host

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestDeletedSecretReleasedOnceNoHostNamesIt: a Secret the host stopped naming (here its old user
// data) can be deleted, keeping finalizers that are not ours; a Secret deleted while a host names
// it stays until the host stops naming it.
func TestDeletedSecretReleasedOnceNoHostNamesIt(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	op := startOperator(t, ns, fixture.New(fixture.Config{}))
	userA := builder.DataSecret(ns, "user-a", "userData", "#cloud-config\n")
	userA.Finalizers = []string{"example.com/keep"} // someone else's, which must stay
	create(t, userA, builder.DataSecret(ns, "user-b", "userData", "#cloud-config\n"))
	// Offline, the host stays available and reads its user data at every look.
	h := newHost(ns, "h").WithOnline(false).WithUserData("user-a").Build()
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	waitHeld(t, ns, "user-a")

	// The host moves to user-b; user-a, deleted afterwards, loses our finalizer only.
	rv := update(t, h, func(h *metal3.BareMetalHost) { h.Spec.UserData.Name = "user-b" })
	op.waitSeen(t, ns, "h", rv, 1)
	waitHeld(t, ns, "user-b")
	deleteSecret(t, ns, "user-a")
	poll.Until(t, "user-a released", func() (bool, string) {
		s := getSecret(t, ns, "user-a")
		return slices.Equal(s.Finalizers, []string{"example.com/keep"}), fmt.Sprintf("finalizers %v", s.Finalizers)
	})
	update(t, getSecret(t, ns, "user-a"), func(s *corev1.Secret) { s.Finalizers = nil })
	waitSecretGone(t, ns, "user-a")

	// user-b, deleted while the host names it, keeps the finalizer...
	deleteSecret(t, ns, "user-b")
	deleting := getSecret(t, ns, "user-b")
	op.waitSecretSeen(t, ns, "user-b", deleting.ResourceVersion, 1)
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "user-b"}, s); err != nil {
		t.Fatalf("user-b, deleted while host h names it: %v", err)
	}
	if s.DeletionTimestamp.IsZero() || !slices.Contains(s.Finalizers, metal3.SecretsFinalizer) {
		t.Fatalf("user-b, deleted while host h names it: deletionTimestamp %v, finalizers %v", s.DeletionTimestamp, s.Finalizers)
	}
	// ... until the host stops naming it.
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.UserData = nil })
	waitSecretGone(t, ns, "user-b")
	if h := getHost(t, ns, "h"); h.Status.Provisioning.State != metal3.StateAvailable || h.Status.ErrorType != "" {
		t.Fatalf("releasing its old Secrets disturbed the host: %s", describe(h))
	}
}

// waitHeld waits until the Secret carries the secret finalizer (a host read it).
func waitHeld(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, name+" held by a host", func() (bool, string) {
		s := getSecret(t, ns, name)
		return slices.Contains(s.Finalizers, metal3.SecretsFinalizer), fmt.Sprintf("finalizers %v", s.Finalizers)
	})
}

func deleteSecret(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatalf("deleting secret %s: %v", name, err)
	}
}

func waitSecretGone(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, "secret "+name+" to be gone", func() (bool, string) {
		s := &corev1.Secret{}
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("deletionTimestamp %v, finalizers %v, error %v", s.DeletionTimestamp, s.Finalizers, err)
	})
}
