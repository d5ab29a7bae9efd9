// Package hostfleet drives many BareMetalHosts on bmcsim's servers through the Kubernetes API, for
// the programs that run a rack through the operator on real Ironic (test/bench/ironic, test/chaos):
// create each server's Secret and host, set or remove images, watch every host of a namespace, and
// do all of it from a few goroutines at once.
package hostfleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// SecretName is the name of the BMC credentials Secret of host name.
func SecretName(host string) string { return host + "-bmc" }

// Create creates the Secret with server's credentials and a host named name for it: its virtual
// media Redfish address over HTTP, its boot MAC, online. An object that exists already is left as
// it is, so that a retry after a lost answer (an API server restarting) creates what is missing.
func Create(ctx context.Context, c client.Client, namespace, name string, server bmcsim.Host) error {
	secret := builder.BMCSecret(namespace, SecretName(name), server.Username, server.Password)
	host := builder.BareMetalHost(namespace, name).WithBMC(server.Addresses["redfish-virtualmedia+http"], secret.Name).
		WithBootMACAddress(server.BootMAC).WithOnline(true).Build()
	for _, obj := range []client.Object{secret, host} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// PatchImage sets (or, with nil, removes) a host's spec.image with a JSON merge patch: no read, no
// conflict.
func PatchImage(ctx context.Context, c client.Client, namespace, name string, image *metal3.Image) error {
	var body string
	if image == nil {
		body = `{"spec":{"image":null}}`
	} else {
		body = fmt.Sprintf(`{"spec":{"image":{"url":%q,"checksum":%q,"checksumType":%q,"format":"raw"}}}`, image.URL, image.Checksum, image.ChecksumType)
	}
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return c.Patch(ctx, h, client.RawPatch("application/merge-patch+json", []byte(body)))
}

// Watch calls observe with every host of namespace as the API server reports it (deleted set once
// it is gone) until ctx ends; it returns once the initial list was seen. The watch survives API
// server restarts (the informer lists again).
func Watch(ctx context.Context, cfg *rest.Config, namespace string, observe func(h *metal3.BareMetalHost, deleted bool)) error {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &metal3.BareMetalHost{})
	if err != nil {
		return err
	}
	call := func(obj any, deleted bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if h, ok := obj.(*metal3.BareMetalHost); ok {
			observe(h, deleted)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(obj, false) },
		UpdateFunc: func(_, obj any) { call(obj, false) },
		DeleteFunc: func(obj any) { call(obj, true) },
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("the watch of namespace %s did not sync", namespace)
	}
	return nil
}

// Parallel runs fn(0..n-1) from 32 goroutines and returns the first error (the goroutine that
// met it stops; the others go on).
func Parallel(n int, fn func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Unlimited is cfg without a client-side rate limit, for the creators of a whole rack.
func Unlimited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}
