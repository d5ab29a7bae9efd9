package imagecustomization

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr/testr"
	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/imagecustomization/imageserver"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

// A PreprovisioningImage deleted without ICC's finalizer step and created again under its name
// before the next reconcile (new UID) is never seen gone: the reconcile of the new object
// discards the old one's image (its network configuration and pull secret), whose URL then
// answers 404, and keeps the new one's. The reconciles are called one by one, against the real
// API server, so that nothing runs between the deletion and the new object's creation.
func TestRecreatedUnderSameName(t *testing.T) {
	ns := env.Namespace(t)
	catalog, err := baseimage.Load(basePaths(t))
	must(t, err)
	store, err := imagestore.Open(t.TempDir())
	must(t, err)
	b, err := imagebuild.New(imagebuild.Config{Catalog: catalog, Store: store, PublishURL: "http://192.0.2.1:8084", Log: testr.New(t), Agent: testAgent})
	must(t, err)
	srv := httptest.NewServer(&imageserver.Server{Store: store, Valid: b.Valid})
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.GracePeriod = 0
	r := &Reconciler{Client: env.Client, APIReader: env.Client, Builder: b, Config: cfg,
		Recorder: &k8sevents.FakeRecorder{Events: make(chan string, 100)}}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "h"}}

	create(t, newPPI(ns, "h"))
	_, err = r.Reconcile(context.Background(), req)
	must(t, err)
	first := get(t, ns, "h")
	old := b.Current(string(first.UID))
	if old == nil || !isReady(first) {
		t.Fatalf("no image for the first object: %s", describe(first))
	}
	if code, _ := download(t, srv.URL+"/"+old.Image); code != http.StatusOK {
		t.Fatalf("the first object's image answers %d", code)
	}

	update(t, first, func() { first.Finalizers = nil })
	must(t, env.Client.Delete(context.Background(), first))
	second := newPPI(ns, "h")
	create(t, second)
	if second.UID == first.UID {
		t.Fatal("the object created again has the old UID")
	}
	_, err = r.Reconcile(context.Background(), req)
	must(t, err)

	if rec := store.Get(string(first.UID)); rec != nil {
		t.Errorf("the first object's image is still recorded: %s", rec.Image)
	}
	if code, _ := download(t, srv.URL+"/"+old.Image); code != http.StatusNotFound {
		t.Errorf("the first object's image answers %d, want 404", code)
	}
	if b.Current(string(second.UID)) == nil || !isReady(get(t, ns, "h")) {
		t.Errorf("the new object has no image: %s", describe(get(t, ns, "h")))
	}
}
