package specialresource

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

// recipeConfigMapField indexes SpecialResources by the recipe ConfigMaps they read
// ("namespace/name"): spec.recipe.configMap and every spec.dependsOn[].recipe.configMap.
const recipeConfigMapField = "sro.recipeConfigMaps"

// recipeConfigMaps is the index function of recipeConfigMapField.
func recipeConfigMaps(o client.Object) []string {
	sr, ok := o.(*sro.SpecialResource)
	if !ok {
		return nil
	}
	var keys []string
	if cm := sr.Spec.Recipe.ConfigMap; cm != nil {
		keys = append(keys, cm.Namespace+"/"+cm.Name)
	}
	for _, d := range sr.Spec.DependsOn {
		if d.Recipe != nil && d.Recipe.ConfigMap != nil {
			keys = append(keys, d.Recipe.ConfigMap.Namespace+"/"+d.Recipe.ConfigMap.Name)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// recipeConfigMapSource wakes the SpecialResources that read a recipe ConfigMap when it is
// created, changed or deleted, so that a fixed recipe is used at once (not at the next Resync).
//
// Recipe ConfigMaps are the user's, not labelled as the operator's, and the manager's cache sees
// only labelled ConfigMaps (CacheViews; a cache view is per kind, and a metadata-only watch
// through the manager's cache would get the same label filter). So this watch has a cache of its
// own, used by nothing else: metadata only (the API server sends no data), each entry reduced to
// namespace, name, uid and resourceVersion, so that its memory is a few hundred bytes per
// ConfigMap of the cluster, whatever their size. Recipes are still read from the API server
// (loadRecipe), never from this cache.
func (r *Reconciler) recipeConfigMapSource(ctx context.Context, mgr ctrl.Manager) (source.Source, error) {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &sro.SpecialResource{}, recipeConfigMapField, recipeConfigMaps); err != nil {
		return nil, fmt.Errorf("indexing SpecialResources by recipe ConfigMap: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(), DefaultTransform: compactMetadata})
	if err != nil {
		return nil, fmt.Errorf("creating the recipe ConfigMap cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("adding the recipe ConfigMap cache: %w", err)
	}
	// Beside the manager's cache views (cacheview.Describe logs those): what else is cached.
	mgr.GetLogger().Info("A cache of its own", "view",
		"ConfigMap (special-resource-operator recipe watch): metadata only, every namespace, namespace/name/uid/resourceVersion kept")
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return source.Kind(c, cm, handler.TypedEnqueueRequestsFromMapFunc(r.recipeReaders), contentChanged()), nil
}

// contentChanged passes creations, deletions and changes (a new resourceVersion: the informer's
// periodic resync repeats the same one).
func contentChanged() predicate.TypedFuncs[*metav1.PartialObjectMetadata] {
	return predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
		UpdateFunc: func(e event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool {
			return e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
		},
		GenericFunc: func(event.TypedGenericEvent[*metav1.PartialObjectMetadata]) bool { return false },
	}
}

// recipeReaders are the SpecialResources that read the ConfigMap as a recipe.
func (r *Reconciler) recipeReaders(ctx context.Context, cm *metav1.PartialObjectMetadata) []reconcile.Request {
	var list sro.SpecialResourceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{recipeConfigMapField: cm.Namespace + "/" + cm.Name}, cacheview.ReadOnly); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing SpecialResources for a recipe ConfigMap", "configMap", cm.Namespace+"/"+cm.Name)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
	}
	return reqs
}

// compactMetadata keeps what the recipe ConfigMap watch needs of an object's metadata: which
// object it is and whether it changed (labels and annotations, kubectl's last-applied
// configuration among them, can be most of it).
func compactMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name,
		UID: m.UID, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}}, nil
}
