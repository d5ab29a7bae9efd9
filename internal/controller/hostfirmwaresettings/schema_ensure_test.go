package hostfirmwaresettings

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/scheme"
)

// TestEnsureCreatesASchemaFoundThenDeleted (pure unit test, fake client): a schema this process
// only found for a host, and deleted since (the cleaner's race with a new host of the same
// hardware), is created again at once; one it created itself a moment ago is not sent twice
// (the cache may not show it yet).
func TestEnsureCreatesASchemaFoundThenDeleted(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "schema-0123456789abcdef"}
	build := func() *metal3.FirmwareSchema { return &metal3.FirmwareSchema{} }
	now := time.Now()
	clock := func() time.Time { return now }

	existing := &metal3.FirmwareSchema{}
	existing.Name, existing.Namespace = key.Name, key.Namespace
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(existing).Build()
	s := &schemas{client: c, now: clock, grace: time.Minute}
	if err := s.ensure(ctx, key, build); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, existing); err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(ctx, key, build); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &metal3.FirmwareSchema{}); err != nil {
		t.Fatalf("a schema found, then deleted, was not created again: %v", err)
	}

	// Created by this process: deleted behind its back within the grace, it is not sent again.
	if err := c.Delete(ctx, &metal3.FirmwareSchema{ObjectMeta: existing.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(ctx, key, build); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &metal3.FirmwareSchema{}); !apierrors.IsNotFound(err) {
		t.Fatalf("created twice within the grace period: %v", err)
	}
}
