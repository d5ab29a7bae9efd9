package cacheview

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GetLabelling reads obj from a cache that holds only objects labelled label=value (a Label
// view), and, the first time, from the API server through reader, labelling it (a merge patch of
// the label alone, whose response carries the object's new version): from then on the cache holds
// it and its changes reach the watches. An object missing from both is the reader's NotFound.
func GetLabelling(ctx context.Context, cached client.Client, reader client.Reader, key types.NamespacedName, obj client.Object, label, value string) error {
	err := cached.Get(ctx, key, obj)
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := reader.Get(ctx, key, obj); err != nil {
		return err
	}
	if obj.GetLabels()[label] == value {
		return nil // labelled; the cache has not seen it yet
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, label, value)
	if err := cached.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("labelling: %w", err)
	}
	return nil
}
