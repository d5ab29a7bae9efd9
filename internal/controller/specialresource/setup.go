package specialresource

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	buildv1 "github.com/openshift/api/build/v1"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/predicates"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/kernel"
)

// SetupWithManager registers the controller: SpecialResources, the nodes they select, the
// dependencies they wait for, the recipe ConfigMaps they read (recipewatch.go), and the workloads
// and builds they own.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("special-resource-operator")
	}
	if r.Registry == nil {
		r.Registry = image.Remote{}
	}
	if r.Builder == nil {
		r.Builder = build.Choose(r.Client, r.BuildImage)
	}
	if r.Logs == nil || r.ClusterVersion == nil {
		cs, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return fmt.Errorf("creating a clientset: %w", err)
		}
		if r.Logs == nil {
			r.Logs = apiLogs(cs)
		}
		if r.ClusterVersion == nil {
			r.ClusterVersion = clusterVersion(r.APIReader, cs.Discovery(), r.Client)
		}
	}
	def := DefaultConfig()
	if r.Config.WaitPoll == 0 {
		r.Config.WaitPoll = def.WaitPoll
	}
	if r.Config.RetryDelay == 0 {
		r.Config.RetryDelay = def.RetryDelay
	}
	if r.Config.Resync == 0 {
		r.Config.Resync = def.Resync
	}
	if r.Config.LogTailLines == 0 {
		r.Config.LogTailLines = def.LogTailLines
	}
	recipes, err := r.recipeConfigMapSource(ctx, mgr)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("specialresource").
		For(&sro.SpecialResource{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicates.DeletionMarked()))).
		Watches(&sro.SpecialResource{}, handler.EnqueueRequestsFromMapFunc(r.dependants), builder.WithPredicates(readyChanged())).
		Watches(&corev1.Node{}, nodeHandler{r: r}).
		WatchesRawSource(recipes).
		Owns(&appsv1.DaemonSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Namespace{})
	if r.Builder.Kind() == "Build" {
		b = b.Owns(&buildv1.Build{})
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.skipNameValidation}).
		Complete(r)
}

// readyChanged passes SpecialResources whose Ready condition changed (for their dependants).
func readyChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*sro.SpecialResource)
			n, okN := e.ObjectNew.(*sro.SpecialResource)
			if !okO || !okN {
				return false
			}
			return conditions.IsCurrent(o.Status.Conditions, sro.ConditionReady, o.Generation) !=
				conditions.IsCurrent(n.Status.Conditions, sro.ConditionReady, n.Generation) || kernelImagesChanged(o, n)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func kernelImagesChanged(o, n *sro.SpecialResource) bool {
	images := func(sr *sro.SpecialResource) map[string]string {
		m := map[string]string{}
		for _, k := range sr.Status.Kernels {
			m[k.KernelVersion] = k.Image
		}
		return m
	}
	return !maps.Equal(images(o), images(n))
}

// dependants are the SpecialResources whose dependsOn names o.
func (r *Reconciler) dependants(ctx context.Context, o client.Object) []reconcile.Request {
	var all sro.SpecialResourceList
	if err := r.Client.List(ctx, &all, cacheview.ReadOnly); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing SpecialResources for a dependency", "dependency", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, sr := range all.Items {
		for _, d := range sr.Spec.DependsOn {
			if d.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: sr.Name}})
			}
		}
	}
	return reqs
}

// nodeHandler wakes the SpecialResources a node change matters to: those whose nodeSelector
// matches the node before or after, when the match, the node's kernel, its kernel label or its
// operating-system labels changed (node heartbeats, and other SpecialResources' state labels, wake nobody).
type nodeHandler struct{ r *Reconciler }

func (h nodeHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, q, func(sr *sro.SpecialResource) bool { return selects(sr, e.Object.GetLabels()) })
}

func (h nodeHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.enqueue(ctx, q, func(sr *sro.SpecialResource) bool { return selects(sr, e.Object.GetLabels()) })
}

func (h nodeHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, okO := e.ObjectOld.(*corev1.Node)
	n, okN := e.ObjectNew.(*corev1.Node)
	if !okO || !okN {
		return
	}
	// node-feature-discovery's OS labels too: after an upgrade they follow the kernel late, and
	// the kernel's objects are rendered again with them.
	kernelChanged := kernel.OfNode(o) != kernel.OfNode(n) || o.Labels[sro.KernelLabel] != n.Labels[sro.KernelLabel] ||
		kernel.OSLabelsChanged(o.Labels, n.Labels)
	h.enqueue(ctx, q, func(sr *sro.SpecialResource) bool {
		before, after := selects(sr, o.Labels), selects(sr, n.Labels)
		return before != after || (after && kernelChanged)
	})
}

func (nodeHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h nodeHandler) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], match func(*sro.SpecialResource) bool) {
	var all sro.SpecialResourceList
	if err := h.r.Client.List(ctx, &all, cacheview.ReadOnly); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing SpecialResources for a node change")
		return
	}
	for i := range all.Items {
		if match(&all.Items[i]) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: all.Items[i].Name}})
		}
	}
}

func selects(sr *sro.SpecialResource, l map[string]string) bool {
	return labels.SelectorFromSet(sr.Spec.NodeSelector).Matches(labels.Set(l))
}

// apiLogs reads pod logs through the API server (which asks the node's kubelet).
func apiLogs(cs kubernetes.Interface) func(ctx context.Context, namespace, pod, container string, tailLines int64) (string, error) {
	return func(ctx context.Context, namespace, pod, container string, tailLines int64) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		data, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &tailLines}).DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("reading the log of pod %s/%s: %w", namespace, pod, err)
		}
		return string(data), nil
	}
}

// clusterVersionTTL is how long the cluster version is remembered.
const clusterVersionTTL = 5 * time.Minute

// clusterVersion reads OpenShift's ClusterVersion "version" (the desired version) when the
// cluster serves it, else the Kubernetes version; remembered for clusterVersionTTL.
func clusterVersion(reader client.Reader, disc discovery.ServerVersionInterface, c client.Client) func(ctx context.Context) (string, error) {
	var (
		mu      sync.Mutex
		version string
		at      time.Time
	)
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if version != "" && time.Since(at) < clusterVersionTTL {
			return version, nil
		}
		v := ""
		if _, err := c.RESTMapper().RESTMapping(configv1.GroupVersion.WithKind("ClusterVersion").GroupKind(), "v1"); err == nil {
			// A read that fails is an error, not the Kubernetes version: each kernel keeps the
			// version it was first rendered with, and a stand-in would stay with it.
			cv := &configv1.ClusterVersion{}
			if err := reader.Get(ctx, client.ObjectKey{Name: "version"}, cv); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("reading ClusterVersion version: %w", err)
			} else if err == nil {
				v = cv.Status.Desired.Version
			}
		}
		if v == "" {
			info, err := disc.ServerVersion()
			if err != nil {
				return "", fmt.Errorf("reading the server version: %w", err)
			}
			v = strings.TrimPrefix(info.GitVersion, "v")
		}
		version, at = v, time.Now()
		return version, nil
	}
}
