// Package cacheview builds a manager's cache and client options from what each controller in the
// process declares about the kinds it reads. The cache is shared by every controller of a manager:
// a reduction one controller makes for memory (a Secret cache filtered by label, hosts cached
// without their inspected hardware) is what every other controller reads too. So no controller
// sets cache options of its own; each declares Views, the binary's wiring passes all of them to
// Options in one place, a kind declared twice is an error, and Describe puts what is reduced in
// the startup log. A controller that needs what another's view leaves out reads it through the
// manager's API reader (or the object that holds it, such as HardwareData), never from the cache.
package cacheview

import (
	"fmt"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadOnly reads from the informer cache without copying the object (a Get or List option). Only
// for what is read and dropped: the objects are the cache's own, shared with every other reader,
// so nothing may change them (a Get copies the top-level struct, not its maps and slices) or keep
// them past the reconcile. Worth it where one event or one reconcile reads a whole kind or a
// large object only to decide: at 1000 nodes and 20 SpecialResources, copying every node per
// reconcile and every SpecialResource per node event was most of the special-resource-operator's
// allocations (bench-sro heap profile).
var ReadOnly = client.UnsafeDisableDeepCopy

// View declares how one kind is cached (or not) in a manager shared with other controllers.
type View struct {
	// Object is the kind (an empty object of it).
	Object client.Object
	// Owner names the controller that declared the view (for errors and the startup log).
	Owner string
	// Label, when set, caches only the objects carrying these labels; the others are invisible
	// to every cached read.
	Label labels.Selector
	// Transform reduces each cached object. managedFields are stripped from every cached object
	// whatever the views say.
	Transform toolscache.TransformFunc
	// Uncached: reads of this kind go to the API server, and the kind is never cached.
	Uncached bool
	// Reduced says in words what a cached read of this kind does not show. Required with Label,
	// Transform or Uncached.
	Reduced string
}

// Options returns the cache and client options for a manager watching namespaces (none = all)
// and running controllers that declared views. Two views of one kind are an error: the cache has
// one filter and one transform per kind, so their owners must agree on one view.
func Options(namespaces []string, views ...View) (cache.Options, client.Options, error) {
	co := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{}}
	cl := client.Options{Cache: &client.CacheOptions{}}
	seen := map[reflect.Type]string{}
	for _, v := range views {
		t := reflect.TypeOf(v.Object)
		if owner, dup := seen[t]; dup {
			return cache.Options{}, client.Options{}, fmt.Errorf("cache views: %s declared by both %s and %s", kind(v.Object), owner, v.Owner)
		}
		seen[t] = v.Owner
		if v.Reduced == "" && (v.Label != nil || v.Transform != nil || v.Uncached) {
			return cache.Options{}, client.Options{}, fmt.Errorf("cache views: %s view of %s does not say what it leaves out", v.Owner, kind(v.Object))
		}
		if v.Uncached {
			cl.Cache.DisableFor = append(cl.Cache.DisableFor, v.Object)
			continue
		}
		by := cache.ByObject{Label: v.Label}
		if v.Transform != nil {
			by.Transform = stripThen(v.Transform)
		}
		co.ByObject[v.Object] = by
	}
	if len(namespaces) > 0 {
		co.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			co.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return co, cl, nil
}

// stripThen strips managedFields before the view's transform (a ByObject transform replaces the
// default one).
func stripThen(f toolscache.TransformFunc) toolscache.TransformFunc {
	strip := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		return f(obj)
	}
}

// Describe lists what the views leave out, one line per kind, sorted, for the startup log.
func Describe(views ...View) []string {
	var lines []string
	for _, v := range views {
		if v.Reduced != "" {
			lines = append(lines, fmt.Sprintf("%s (%s): %s", kind(v.Object), v.Owner, v.Reduced))
		}
	}
	sort.Strings(lines)
	return lines
}

func kind(obj client.Object) string {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
