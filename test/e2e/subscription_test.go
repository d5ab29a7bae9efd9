package e2e

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// eventSubscription: a BMCEventSubscription on real Ironic and bmcsim, through the Kubernetes API
// only: created on the BMC with its destination and context (bmcsim's Redfish EventService lists
// it), created again when its headers Secret changes, deleted from the BMC with the object.
func (s *suite) eventSubscription(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, _ := s.diskImage(ns+"-events", false)
	s.provisioned(t, ns, "events", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	const dest = "https://events.example.com/metal3/"
	headers := builder.DataSecret(ns, "event-headers", "Authorization", "Bearer e2e-subscription-token")
	sub := &metal3.BMCEventSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "events"},
		Spec: metal3.BMCEventSubscriptionSpec{HostName: "events", Destination: dest, Context: "rack-7",
			HTTPHeadersRef: &corev1.SecretReference{Name: headers.Name, Namespace: ns}}}
	if err := s.c.Create(context.Background(), headers); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Create(context.Background(), sub); err != nil {
		t.Fatalf("creating the BMCEventSubscription: %v", err)
	}
	s.waitObject(t, sub, ns, "events", "created on the BMC", func() bool { return sub.Status.SubscriptionID != "" && sub.Status.Error == "" })
	st := s.server(t, srv.Name)
	found := false
	for _, bs := range st.State.Subscriptions {
		if bs.Destination == dest && bs.Context == "rack-7" && slices.Equal(bs.HeaderNames, []string{"Authorization"}) {
			found = true
		}
	}
	if !found || len(st.State.Subscriptions) != 1 {
		t.Fatalf("bmcsim's subscriptions %+v: want the one subscription with the spec's destination, context and header", st.State.Subscriptions)
	}
	s.waitObjectEvent(t, ns, "BMCEventSubscription", "events", "SubscriptionCreated", sub.Status.SubscriptionID)

	// A rotated token and a header added: the subscription on the BMC is replaced by one with the
	// Secret's new headers.
	first := sub.Status.SubscriptionID
	if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(headers), headers); err != nil {
		t.Fatal(err)
	}
	headers.Data = map[string][]byte{"Authorization": []byte("Bearer e2e-rotated-token"), "X-Tenant": []byte("e2e")}
	if err := s.c.Update(context.Background(), headers); err != nil {
		t.Fatalf("rotating the headers Secret: %v", err)
	}
	s.waitObject(t, sub, ns, "events", "created again with the new headers", func() bool {
		return sub.Status.SubscriptionID != "" && sub.Status.SubscriptionID != first && sub.Status.Error == ""
	})
	if st := s.server(t, srv.Name); len(st.State.Subscriptions) != 1 ||
		!slices.Equal(st.State.Subscriptions[0].HeaderNames, []string{"Authorization", "X-Tenant"}) {
		t.Fatalf("bmcsim's subscriptions %+v after the rotation: want one, with the Secret's two headers", st.State.Subscriptions)
	}
	s.waitObjectEvent(t, ns, "BMCEventSubscription", "events", "SubscriptionHeadersChanged", first)

	if err := s.c.Delete(context.Background(), sub); err != nil {
		t.Fatalf("deleting the BMCEventSubscription: %v", err)
	}
	s.waitObjectGone(t, &metal3.BMCEventSubscription{}, ns, "events", "after its deletion")
	if st := s.server(t, srv.Name); len(st.State.Subscriptions) != 0 {
		t.Errorf("bmcsim still has subscriptions %+v after the deletion", st.State.Subscriptions)
	}
}
