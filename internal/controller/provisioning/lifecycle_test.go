package provisioning

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/test/poll"
)

var disabled = metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}

var managedSpec = metal3.ProvisioningSpec{
	ProvisioningInterface: "eth1", ProvisioningIP: "172.22.0.3", ProvisioningNetworkCIDR: "172.22.0.0/24",
	ProvisioningDHCPRange: "172.22.0.10,172.22.0.100", ProvisioningNetwork: metal3.ProvisioningNetworkManaged,
}

// TestUnsupportedPlatform: on a platform without bare metal the operator creates the
// ClusterOperator, reports Disabled and nothing else, deploys nothing, and then stays idle.
func TestUnsupportedPlatform(t *testing.T) {
	op := setup(t, options{platform: configv1.NutanixPlatformType, release: "4.22.0"})
	c := waitCO(t, map[string]string{
		"Available": "True/AsExpected", "Progressing": "False/AsExpected", "Degraded": "False/AsExpected",
		"Disabled": "True/UnsupportedPlatform", "Upgradeable": "True/AsExpected",
	})
	if d := clusteroperator.Condition(c, clusteroperator.Disabled); d.Message != "Nothing to do on this Platform" {
		t.Errorf("Disabled message %q", d.Message)
	}
	if len(c.Status.Versions) != 1 || c.Status.Versions[0].Version != "4.22.0" {
		t.Errorf("versions %v: nothing to deploy is at level", c.Status.Versions)
	}
	if c.Annotations["capability.openshift.io/name"] != "baremetal" {
		t.Errorf("annotations %v", c.Annotations)
	}
	// Even with a Provisioning object there is nothing to do, and nothing runs once the events of
	// its creation are handled: no periodic work.
	createProvisioning(t, managedSpec, nil)
	settled := reconcileCount()
	poll.Until(t, "the operator to settle", func() (bool, string) {
		last := reconcileCount()
		time.Sleep(time.Second)
		settled = reconcileCount()
		return settled == last, "still reconciling"
	})
	time.Sleep(3 * time.Second)
	if n := reconcileCount() - settled; n > 0 {
		t.Errorf("%v reconciles in 3 s while idle on an unsupported platform", n)
	}
	var deps, secs, svcs = listNames(t, op.ns)
	if len(deps)+len(secs)+len(svcs) > 0 {
		t.Errorf("objects deployed on an unsupported platform: %v %v %v", deps, secs, svcs)
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: render.CBOWebhookConfig}, &admissionv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Provisioning webhook is configured on an unsupported platform (%v)", err)
	}
}

// TestCloudPlatform: on a cloud platform only Disabled is allowed; Managed is an invalid
// configuration naming the field and the platform, and fixing it deploys.
func TestCloudPlatform(t *testing.T) {
	op := setup(t, options{platform: configv1.AWSPlatformType})
	createProvisioning(t, managedSpec, nil)
	c := waitCO(t, map[string]string{"Degraded": "True/InvalidConfiguration", "Available": "True/InvalidConfiguration", "Disabled": "False/AsExpected"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; !strings.Contains(m, "spec.provisioningNetwork") || !strings.Contains(m, "platform AWS") {
		t.Errorf("Degraded message %q: want the field and the platform", m)
	}
	if deployment(t, op.ns, render.Metal3Deployment) != nil {
		t.Fatal("an invalid configuration was deployed")
	}
	updateSpec(t, func(p *metal3.Provisioning) { p.Spec = disabled })
	waitDeployment(t, op.ns, render.Metal3Deployment)
	deployComplete(t, op.ns)
}

// TestOtherPlatforms: None is bare metal without an installer-provisioned network (every mode);
// vSphere allows Disabled only; External gets nothing.
func TestOtherPlatforms(t *testing.T) {
	for name, tc := range map[string]struct {
		platform configv1.PlatformType
		want     map[string]string
	}{
		"None, Managed deploys":    {configv1.NonePlatformType, map[string]string{"Progressing": "True/SyncingResources", "Degraded": "False/AsExpected"}},
		"vSphere, Managed refused": {configv1.VSpherePlatformType, map[string]string{"Degraded": "True/InvalidConfiguration"}},
		"External, nothing to do":  {configv1.ExternalPlatformType, map[string]string{"Disabled": "True/UnsupportedPlatform", "Available": "True/AsExpected"}},
	} {
		t.Run(name, func(t *testing.T) {
			op := setup(t, options{platform: tc.platform})
			createProvisioning(t, managedSpec, nil)
			waitCO(t, tc.want)
			if got := deployment(t, op.ns, render.Metal3Deployment) != nil; got != (tc.platform == configv1.NonePlatformType) {
				t.Errorf("metal3 deployed: %v", got)
			}
		})
	}
}

// TestWaitingForProvisioningCR: on bare metal without a Provisioning object the operator is
// Available and waits; its own webhook is configured already (it validates the object's creation).
func TestWaitingForProvisioningCR(t *testing.T) {
	op := setup(t, options{release: "4.22.0", webhook: true})
	c := waitCO(t, map[string]string{"Available": "True/WaitingForProvisioningCR", "Progressing": "False/AsExpected", "Degraded": "False/AsExpected", "Disabled": "False/AsExpected"})
	if len(c.Status.RelatedObjects) == 0 || c.Status.RelatedObjects[0].Resource != "namespaces" || c.Status.RelatedObjects[0].Name != op.ns {
		t.Errorf("related objects %v", c.Status.RelatedObjects)
	}
	w := &admissionv1.ValidatingWebhookConfiguration{}
	poll.Until(t, "the Provisioning webhook configuration", func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Name: render.CBOWebhookConfig}, w)
		return err == nil, "not there"
	})
	cert := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: secrets.CBOWebhookCert}, cert); err != nil {
		t.Fatal(err)
	}
	if string(w.Webhooks[0].ClientConfig.CABundle) != string(cert.Data[secrets.KeyCA]) || w.Webhooks[0].ClientConfig.Service.Namespace != op.ns {
		t.Error("the webhook configuration does not trust the operator's certificate, or names another namespace")
	}
}

// TestDeploy: a Provisioning object gets the finalizer and the whole stack; the operator is
// Progressing until both Deployments are available, then DeployComplete at the release version,
// with the baremetal-operator's webhook configured only once it runs. A second reconcile writes
// nothing.
func TestDeploy(t *testing.T) {
	op := setup(t, options{release: "4.22.0"})
	start := time.Now()
	createProvisioning(t, disabled, nil)
	waitCO(t, map[string]string{"Available": "True/SyncingResources", "Progressing": "True/SyncingResources", "Degraded": "False/AsExpected"})
	p := getProvisioning(t)
	if !slices.Contains(p.Finalizers, metal3.ProvisioningFinalizer) {
		t.Errorf("finalizers %v", p.Finalizers)
	}
	deps, secs, svcs := listNames(t, op.ns)
	if !slices.Equal(deps, []string{render.Metal3Deployment, render.BMODeployment}) ||
		!slices.Equal(svcs, []string{render.BMOWebhookService, render.StateService}) ||
		!slices.Equal(secs, []string{secrets.BMOWebhookCert, secrets.IronicCredentials, secrets.IronicTLS, AppliedSpecSecret}) {
		t.Fatalf("deployed %v %v %v", deps, secs, svcs)
	}
	m := deployment(t, op.ns, render.Metal3Deployment)
	if ref := m.OwnerReferences; len(ref) != 1 || ref[0].UID != p.UID || ref[0].Controller == nil || !*ref[0].Controller {
		t.Errorf("metal3 owner references %v", ref)
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: render.BMOWebhookConfig}, &admissionv1.ValidatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("the baremetal-operator's webhook is configured before it runs (%v)", err)
	}
	if c := co(t); len(c.Status.Versions) != 0 {
		t.Errorf("versions %v before the stack ran", c.Status.Versions)
	}
	waitEvent(t, start, ReasonCreated, "Deployment "+op.ns+"/metal3")
	waitEvent(t, start, ReasonSecretGenerated, secrets.IronicCredentials)

	markAvailable(t, op.ns, render.Metal3Deployment)
	waitCO(t, map[string]string{"Progressing": "True/SyncingResources"})
	c := deployComplete(t, op.ns)
	if len(c.Status.Versions) != 1 || c.Status.Versions[0] != (configv1.OperandVersion{Name: "operator", Version: "4.22.0"}) {
		t.Errorf("versions %v", c.Status.Versions)
	}
	poll.Until(t, "the baremetal-operator's webhook configuration", func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Name: render.BMOWebhookConfig}, &admissionv1.ValidatingWebhookConfiguration{})
		return err == nil, "not there"
	})
	p = getProvisioning(t)
	if p.Status.ObservedGeneration != p.Generation || len(p.Status.Generations) != 2 {
		t.Errorf("status observedGeneration %d (generation %d), generations %v", p.Status.ObservedGeneration, p.Generation, p.Status.Generations)
	}
	waitEvent(t, start, ReasonDeployComplete, "running")

	// Nothing changes from now on: reconciles (woken here by an annotation on the Provisioning
	// object) write nothing.
	before := versions(t, op.ns)
	writes, reconciles := writeCount(), reconcileCount()
	updateSpec(t, func(p *metal3.Provisioning) { p.Annotations = map[string]string{"example.com/touched": "1"} })
	poll.Until(t, "a reconcile", func() (bool, string) { return reconcileCount() > reconciles, "none" })
	time.Sleep(time.Second)
	after := versions(t, op.ns)
	delete(before, "provisioning")
	delete(after, "provisioning")
	if !mapsEqual(before, after) {
		t.Errorf("objects rewritten while nothing changed:\nbefore %v\nafter  %v", before, after)
	}
	if n := writeCount() - writes; n != 0 {
		t.Errorf("%v writes while nothing changed", n)
	}
}

// listNames lists the Deployments, Secrets and Services in ns, sorted.
func listNames(t *testing.T, ns string) (deps, secs, svcs []string) {
	t.Helper()
	ctx := context.Background()
	var dl appsListT
	if err := env.Client.List(ctx, &dl.deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &dl.secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &dl.services, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, d := range dl.deployments.Items {
		deps = append(deps, d.Name)
	}
	for _, s := range dl.secrets.Items {
		secs = append(secs, s.Name)
	}
	for _, s := range dl.services.Items {
		svcs = append(svcs, s.Name)
	}
	slices.Sort(deps)
	slices.Sort(secs)
	slices.Sort(svcs)
	return deps, secs, svcs
}

// versions maps every object of the stack to its resourceVersion.
func versions(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var dl appsListT
	for _, list := range []client.ObjectList{&dl.deployments, &dl.secrets, &dl.services} {
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dl.deployments.Items {
		out["deployment/"+d.Name] = d.ResourceVersion
	}
	for _, s := range dl.secrets.Items {
		out["secret/"+s.Name] = s.ResourceVersion
	}
	for _, s := range dl.services.Items {
		out["service/"+s.Name] = s.ResourceVersion
	}
	var webhooks admissionv1.ValidatingWebhookConfigurationList
	if err := env.Client.List(ctx, &webhooks); err != nil {
		t.Fatal(err)
	}
	for _, w := range webhooks.Items {
		out["webhook/"+w.Name] = w.ResourceVersion
	}
	out["clusteroperator"] = co(t).ResourceVersion
	out["provisioning"] = getProvisioning(t).ResourceVersion
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
