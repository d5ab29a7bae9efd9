package provisioning

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// proxyName is the cluster's Proxy singleton.
const proxyName = "cluster"

// observed is everything one reconcile decides from, read before anything is written.
type observed struct {
	now       time.Time
	namespace string
	release   string
	resync    time.Duration
	retry     time.Duration

	// serveWebhook: the operator serves its Provisioning webhook.
	serveWebhook bool

	features platform.Features
	// co is the ClusterOperator; coMissing: it does not exist yet (co is a new one to create).
	co        *configv1.ClusterOperator
	coMissing bool
	// prov is the Provisioning singleton (nil when there is none).
	prov *metal3.Provisioning

	images    render.Images
	imagesErr error
	proxy     *render.Proxy
	// clusterPullSecret is the data of the cluster's pull secret (nil when there is none).
	clusterPullSecret map[string][]byte

	// What exists, by name (absent: not there).
	secrets     map[string]*corev1.Secret
	deployments map[string]*appsv1.Deployment
	// pods are the stack's pods (those with the component label): how their containers restart.
	pods           []corev1.Pod
	services       map[string]*corev1.Service
	webhookConfigs map[string]*admissionv1.ValidatingWebhookConfiguration
	// daemonSets are OpenShift's operator's DaemonSets still there (leftoverDaemonSets).
	daemonSets map[string]*appsv1.DaemonSet

	// busy says which hosts are in an operation an upgrade would break ("" when none).
	busy string
	// ironicHostIPs are the addresses of the metal3 pod (render.Input.IronicHostIPs).
	ironicHostIPs []string
}

// stackSecrets are the Secrets of the stack (deleted with it); the operator's own webhook
// certificate is the platform's and stays.
var stackSecrets = []string{secrets.IronicCredentials, secrets.IronicTLS, secrets.BMOWebhookCert, render.ICCConfigSecret, secrets.PullSecret, AppliedSpecSecret}

// The stack's Deployments and Services, by name (what observe reads and deletion removes).
var (
	stackDeployments = []string{render.Metal3Deployment, render.BMODeployment, render.ICCDeployment}
	stackServices    = []string{render.StateService, render.BMOWebhookService, render.ICCService, render.IronicProxy}
	// leftoverDaemonSets are OpenShift's operator's DaemonSets this one removes (render.IronicProxy).
	leftoverDaemonSets = []string{render.IronicProxy, render.ImageCache}
)

func (r *Reconciler) observe(ctx context.Context, now time.Time) (*observed, error) {
	o := &observed{now: now, namespace: r.Config.Namespace, release: r.Config.ReleaseVersion, resync: r.Config.Resync,
		retry:        r.Config.RetryInvalid,
		serveWebhook: r.WebhookCerts != nil,
		secrets:      map[string]*corev1.Secret{}, deployments: map[string]*appsv1.Deployment{},
		services: map[string]*corev1.Service{}, webhookConfigs: map[string]*admissionv1.ValidatingWebhookConfiguration{},
		daemonSets: map[string]*appsv1.DaemonSet{}}

	infra := &configv1.Infrastructure{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: platform.InfrastructureName}, infra); err != nil {
		// Without it the operator cannot tell what to do: retried with backoff, nothing written.
		return nil, fmt.Errorf("reading infrastructures.config.openshift.io/%s: %w", platform.InfrastructureName, err)
	}
	o.features = platform.Of(infra)

	o.co = &configv1.ClusterOperator{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: clusteroperator.Name}, o.co); apierrors.IsNotFound(err) {
		o.co, o.coMissing = clusteroperator.New(), true
	} else if err != nil {
		return nil, fmt.Errorf("reading clusteroperator %s: %w", clusteroperator.Name, err)
	}
	if !o.features.Enabled() {
		return o, nil // nothing else matters on this platform
	}

	prov := &metal3.Provisioning{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: metal3.ProvisioningSingletonName}, prov); err == nil {
		o.prov = prov
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading provisioning %s: %w", metal3.ProvisioningSingletonName, err)
	}

	o.images, o.imagesErr = render.ReadImages(r.Config.ImagesPath)
	if err := r.observeProxy(ctx, o); err != nil {
		return nil, err
	}
	if err := r.observeClusterPullSecret(ctx, o); err != nil {
		return nil, err
	}
	if err := r.observeDeployed(ctx, o); err != nil {
		return nil, err
	}
	if o.prov != nil {
		busy, err := r.busyHosts(ctx, o.prov)
		if err != nil {
			return nil, err
		}
		o.busy = busy
	}
	return o, nil
}

func (r *Reconciler) observeProxy(ctx context.Context, o *observed) error {
	proxy := &configv1.Proxy{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: proxyName}, proxy)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading proxies.config.openshift.io/%s: %w", proxyName, err)
	}
	st := proxy.Status
	if st.HTTPProxy != "" || st.HTTPSProxy != "" {
		o.proxy = &render.Proxy{HTTPProxy: st.HTTPProxy, HTTPSProxy: st.HTTPSProxy, NoProxy: st.NoProxy}
	}
	return nil
}

// observeClusterPullSecret reads the cluster's pull secret from the cache, which holds that one
// Secret of its namespace (CacheOptions). None is no error: a cluster whose registry needs no
// credentials has none. Only its data is kept, and nothing here prints it.
func (r *Reconciler) observeClusterPullSecret(ctx context.Context, o *observed) error {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: secrets.ClusterPullSecretNamespace, Name: secrets.ClusterPullSecretName}
	if err := getOptional(ctx, r.Client, key, s); err != nil {
		return err
	}
	o.clusterPullSecret = s.Data
	return nil
}

// observeDeployed reads what the stack consists of. Secrets are cached only when they carry the
// component label; one that exists without it (made by an earlier operator) is read directly, so
// that it is adopted and never generated again.
func (r *Reconciler) observeDeployed(ctx context.Context, o *observed) error {
	ns := o.namespace
	for _, name := range append(stackSecrets, secrets.CBOWebhookCert) {
		s := &corev1.Secret{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
		if apierrors.IsNotFound(err) {
			err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading secret %s/%s: %w", ns, name, err)
		default:
			o.secrets[name] = s
		}
	}
	for _, name := range stackDeployments {
		d := &appsv1.Deployment{}
		if err := getOptional(ctx, r.Client, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		} else if d.Name != "" {
			o.deployments[name] = d
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{render.ComponentLabel}); err != nil {
		return fmt.Errorf("reading the stack's pods in %s: %w", ns, err)
	}
	o.pods = pods.Items
	for _, name := range stackServices {
		s := &corev1.Service{}
		if err := getOptional(ctx, r.Client, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			return err
		} else if s.Name != "" {
			o.services[name] = s
		}
	}
	for _, name := range leftoverDaemonSets {
		// Read by name, uncached: no watch on DaemonSets for two names that, once removed, never
		// come back.
		d := &appsv1.DaemonSet{}
		if err := getOptional(ctx, r.APIReader, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		} else if d.Name != "" {
			o.daemonSets[name] = d
		}
	}
	for _, name := range []string{render.BMOWebhookConfig, render.CBOWebhookConfig} {
		w := &admissionv1.ValidatingWebhookConfiguration{}
		if err := getOptional(ctx, r.Client, types.NamespacedName{Name: name}, w); err != nil {
			return err
		} else if w.Name != "" {
			o.webhookConfigs[name] = w
		}
	}
	return r.observeIronicAddresses(ctx, o)
}

// observeIronicAddresses reads where the metal3 pod runs from the endpoints of the metal3-state
// Service (the pod uses its node's network, so its address is the node's): Ironic's address when
// the spec names none. Endpoints of a pod that is going away do not count; one that is not ready
// yet does (Ironic will listen there). Between two pods there is none: decide keeps the last
// address then (ironicHostIPs in secrets.go).
func (r *Reconciler) observeIronicAddresses(ctx context.Context, o *observed) error {
	var list discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: render.StateService}); err != nil {
		return fmt.Errorf("reading the endpoints of service %s/%s: %w", o.namespace, render.StateService, err)
	}
	var addrs []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Terminating == nil || !*e.Conditions.Terminating {
				addrs = append(addrs, e.Addresses...)
			}
		}
	}
	o.ironicHostIPs = render.SortAddresses(addrs)
	return nil
}

// getOptional reads an object; a missing one leaves obj empty (no name) and is no error.
func getOptional(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) error {
	err := c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return nil
}
