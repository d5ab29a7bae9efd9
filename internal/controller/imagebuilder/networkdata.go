package imagebuilder

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

// networkDataField indexes images by the Secret their spec names.
const networkDataField = ".metalforge.networkDataName"

// IndexNetworkData registers the index of images by spec.networkDataName and returns the handler
// that wakes the images naming a Secret. Every change of the Secret counts: its resourceVersion is
// what status.networkData.version records and the host controller compares.
func IndexNetworkData(ctx context.Context, mgr ctrl.Manager) (handler.EventHandler, error) {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3.PreprovisioningImage{}, networkDataField, func(o client.Object) []string {
		if name := o.(*metal3.PreprovisioningImage).Spec.NetworkDataName; name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing PreprovisioningImages by network data Secret: %w", err)
	}
	c := mgr.GetClient()
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list metal3.PreprovisioningImageList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{networkDataField: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing PreprovisioningImages using a Secret", "secret", client.ObjectKeyFromObject(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}), nil
}

// NetworkDataSecret reads the Secret the image names (nil, nil when it names none; ErrMissing when
// it does not exist). The cache holds only Secrets labelled
// environment.metal3.io=baremetal (the host controller labels each host's network data Secret);
// one that is not there yet is read from the API server and labelled, so that its changes reach
// the image from then on (metal3 labels it too).
func NetworkDataSecret(ctx context.Context, cached client.Client, reader client.Reader, ppi *metal3.PreprovisioningImage) (*corev1.Secret, error) {
	name := ppi.Spec.NetworkDataName
	if name == "" {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: ppi.Namespace, Name: name}
	secret := &corev1.Secret{}
	err := cacheview.GetLabelling(ctx, cached, reader, key, secret, metal3.EnvironmentLabel, metal3.EnvironmentLabelValue)
	if apierrors.IsNotFound(err) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, fmt.Errorf("reading network data secret %s: %w", key, err)
	}
	return secret, nil
}

// ErrMissing: the network data Secret does not exist.
var ErrMissing = errors.New("network data secret not found")
