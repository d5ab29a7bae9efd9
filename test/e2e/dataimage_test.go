package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// dataImage: a DataImage on real Ironic and bmcsim, through the Kubernetes API only. An image
// that cannot be fetched holds the rebooting host off with the reason in the DataImage's status;
// the fixed URL is attached (bmcsim's virtual CD holds Ironic's copy) and the host boots its disk
// again; deleting the DataImage leaves the running host's CD alone until its next reboot, which
// empties it and lets the DataImage go.
func (s *suite) dataImage(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	img, path := s.diskImage(ns+"-data", false)
	s.provisioned(t, ns, "data", srv, func(h *metal3.BareMetalHost) { lean(h); h.Spec.Image = &img })
	downloads := s.Images.Downloads(path)
	isoPath := "/data/" + ns + ".iso"
	s.Images.Add(isoPath, s.Images.Bytes("/live.iso"))

	di := &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: metal3.DataImageSpec{URL: s.Images.URL + "/data/missing.iso"}}
	if err := s.c.Create(context.Background(), di); err != nil {
		t.Fatalf("creating the DataImage: %v", err)
	}
	s.waitDataImage(t, ns, "data", "adopted by its host", di, func() bool {
		return len(di.Finalizers) == 1 && len(di.OwnerReferences) == 1 && di.OwnerReferences[0].Kind == "BareMetalHost"
	})
	if st := s.server(t, srv.Name); st.Cd.Inserted {
		t.Fatalf("the running host got a virtual CD (%s) before its next power on", st.Cd.Image)
	}

	// Missing image: the attach fails in Ironic's background; the host waits off, saying why.
	at := time.Now()
	s.annotate(t, ns, "data", metal3.RebootAnnotationPrefix)
	s.waitDataImage(t, ns, "data", "the failed attach reported", di, func() bool {
		return di.Status.Error != nil && di.Status.Error.Count >= 1 && strings.Contains(di.Status.Error.Message, "404")
	})
	if !strings.HasPrefix(di.Status.Error.Message, `attaching "`+di.Spec.URL+`": `) || di.Status.AttachedImage != nil {
		t.Errorf("DataImage status %+v: want the failed image named and nothing attached", di.Status)
	}
	s.waitObjectEvent(t, ns, "DataImage", "data", "DataImageError", "404")
	if h := s.get(t, ns, "data"); h.Status.PoweredOn || h.Status.OperationalStatus != metal3.OperationalStatusOK {
		t.Errorf("host while its DataImage cannot be attached: poweredOn %v, %s %s; want off and OK",
			h.Status.PoweredOn, h.Status.OperationalStatus, h.Status.ErrorMessage)
	}
	if st := s.server(t, srv.Name); st.State.Power != "Off" || st.Cd.Inserted {
		t.Errorf("bmcsim while the attach fails: power %s, CD %+v; want off and empty", st.State.Power, st.Cd)
	}

	// Fixed: attached at once (no backoff for a new URL), and the host boots its disk.
	good := s.Images.URL + isoPath
	s.retryUpdate(t, &metal3.DataImage{}, ns, "data", func(o client.Object) { o.(*metal3.DataImage).Spec.URL = good })
	s.wait(t, ns, "data", "on again with its DataImage", stepTimeout, func(h *metal3.BareMetalHost) bool {
		_, pending := h.Annotations[metal3.RebootAnnotationPrefix]
		return !pending && h.Status.PoweredOn && poweredOffThenOn(s.rec.history(ns, "data", at))
	})
	s.waitDataImage(t, ns, "data", "attached", di, func() bool {
		return di.Status.AttachedImage != nil && di.Status.AttachedImage.URL == good && di.Status.Error == nil
	})
	st := s.server(t, srv.Name)
	if !st.Cd.Inserted || st.Cd.Image == "" || st.State.Booted != "Hdd" {
		t.Errorf("bmcsim after the attach: CD %+v, booted %q; want the image inserted and the disk booted", st.Cd, st.State.Booted)
	}
	if s.Images.Downloads(isoPath) == 0 {
		t.Errorf("nobody downloaded the DataImage's ISO")
	}
	s.wantUntouched(t, srv.Name, img.URL, path, downloads)

	// Deleted: the running host keeps its CD until its next reboot.
	if err := s.c.Delete(context.Background(), &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}}); err != nil {
		t.Fatalf("deleting the DataImage: %v", err)
	}
	s.waitDataImage(t, ns, "data", "marked for deletion", di, func() bool { return !di.DeletionTimestamp.IsZero() })
	if st := s.server(t, srv.Name); !st.Cd.Inserted {
		t.Errorf("the running host's CD was emptied when its DataImage was deleted: it stays until the next power on")
	}
	s.rebootAndWait(t, ns, "data", srv, time.Now())
	s.waitObjectGone(t, &metal3.DataImage{}, ns, "data", "after the reboot")
	if st := s.server(t, srv.Name); st.Cd.Inserted || st.State.Booted != "Hdd" {
		t.Errorf("bmcsim after the reboot: CD %+v, booted %q; want it empty and the disk booted", st.Cd, st.State.Booted)
	}
}

func (s *suite) waitDataImage(t *testing.T, ns, name, what string, di *metal3.DataImage, cond func() bool) {
	t.Helper()
	s.waitObject(t, di, ns, name, what, cond)
}
