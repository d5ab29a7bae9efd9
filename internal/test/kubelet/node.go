package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Image is what a container runs: its root file system as directories, top first, its user and
// its environment (the image configuration's: a container's own variables come after it).
type Image struct {
	Layers   []string
	UID, GID int
	Env      []string
}

// defaultPath is the PATH of an image that sets none (container runtimes add it).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Node runs the Deployments of one namespace.
type Node struct {
	// Name and IP are the node's (spec.nodeName, status.hostIP; the address of host-network pods).
	Name, IP string
	// PodIPs are the addresses given to the other pods, in turn. They must be local addresses
	// (AddAddress puts them on the loopback interface).
	PodIPs []string
	// AddAddress makes a pod IP local (nil: they are local already).
	AddAddress func(ip string) error
	// Dir holds the pods' files, the hostPath volumes and the logs.
	Dir string
	// Images are the images the node can run, by reference.
	Images map[string]Image
	// Client reads Secrets and ConfigMaps and writes Deployment status and EndpointSlices.
	Client client.Client
	// Token issues a service account token (TokenRequest).
	Token func(ctx context.Context, namespace, serviceAccount string) (string, error)
	// APIHost, APIPort and CAData are how pods reach the API server (in-cluster configuration).
	APIHost, APIPort string
	CAData           []byte
	// Namespace is the namespace whose Deployments run here.
	Namespace string
	// Logf receives the node's own messages.
	Logf func(format string, args ...any)

	mu      sync.Mutex
	pods    map[string]*pod
	nextIP  int
	counter int
}

func (n *Node) logf(format string, args ...any) {
	if n.Logf != nil {
		n.Logf(format, args...)
	}
}

// LogPath is where a container's output goes.
func (n *Node) LogPath(deployment, container string) string {
	return filepath.Join(n.Dir, "logs", deployment+"_"+container+".log")
}

func (n *Node) hostPath(p string) string {
	return filepath.Join(n.Dir, "hostpath", filepath.Clean("/"+p))
}

// Starts reports how many times the containers of a Deployment's pods were started (restarts
// add to it).
func (n *Node) Starts(deployment string) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.pods[deployment]; p != nil {
		return p.started.Load()
	}
	return 0
}

// CrashLooping names a container of any pod that was started more than limit times ("" when
// none): a test can stop waiting for something that will not come.
func (n *Node) CrashLooping(limit int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pods {
		p.mu.Lock()
		for name, count := range p.starts {
			if count > limit {
				p.mu.Unlock()
				return p.deployment + "/" + name
			}
		}
		p.mu.Unlock()
	}
	return ""
}

// PodUID is the UID of the Deployment's current pod ("" when none): a new UID is a new pod.
func (n *Node) PodUID(deployment string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.pods[deployment]; p != nil {
		return p.uid
	}
	return ""
}

// Run keeps the namespace's Deployments running until ctx ends, then stops every pod.
func (n *Node) Run(ctx context.Context) error {
	n.pods = map[string]*pod{}
	for _, d := range []string{"logs", "pods", "hostpath"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	defer n.stopAll()
	for sleep(ctx, 300*time.Millisecond) {
		if err := n.sync(ctx); err != nil && ctx.Err() == nil {
			n.logf("sync: %v", err)
		}
	}
	return nil
}

func (n *Node) stopAll() {
	n.mu.Lock()
	pods := n.pods
	n.pods = map[string]*pod{}
	n.mu.Unlock()
	for _, p := range pods {
		p.cancel()
		<-p.done
	}
}

// sync starts, replaces and stops pods, and writes what follows from them.
func (n *Node) sync(ctx context.Context) error {
	var deps appsv1.DeploymentList
	if err := n.Client.List(ctx, &deps, client.InNamespace(n.Namespace)); err != nil {
		return err
	}
	want := map[string]bool{}
	for i := range deps.Items {
		d := &deps.Items[i]
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			continue // scaled to zero: no pod
		}
		want[d.Name] = true
		hash := templateHash(d)
		n.mu.Lock()
		p := n.pods[d.Name]
		n.mu.Unlock()
		if p != nil && p.hash == hash {
			continue
		}
		if p != nil {
			n.logf("deployment %s: pod template changed, replacing pod %s (Recreate)", d.Name, p.name)
			p.cancel()
			<-p.done
		}
		np, err := n.startPod(ctx, d, hash)
		if err != nil {
			n.logf("deployment %s: %v", d.Name, err)
			continue
		}
		n.mu.Lock()
		n.pods[d.Name] = np
		n.mu.Unlock()
	}
	n.mu.Lock()
	var gone []*pod
	for name, p := range n.pods {
		if !want[name] {
			gone = append(gone, p)
			delete(n.pods, name)
		}
	}
	n.mu.Unlock()
	for _, p := range gone {
		n.logf("deployment %s deleted: stopping pod %s", p.deployment, p.name)
		p.cancel()
		<-p.done
	}
	for i := range deps.Items {
		if err := n.writeStatus(ctx, &deps.Items[i]); err != nil {
			return err
		}
	}
	return n.syncServices(ctx)
}

func templateHash(d *appsv1.Deployment) string {
	b, _ := json.Marshal(d.Spec.Template)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}

func (n *Node) startPod(ctx context.Context, d *appsv1.Deployment, hash string) (*pod, error) {
	n.mu.Lock()
	n.counter++
	p := &pod{node: n, namespace: n.Namespace, deployment: d.Name, hash: hash, spec: *d.Spec.Template.Spec.DeepCopy(),
		labels: d.Spec.Template.Labels, name: fmt.Sprintf("%s-%s-%d", d.Name, hash[:6], n.counter),
		uid: fmt.Sprintf("pod-%s-%d", hash, n.counter), done: make(chan struct{})}
	ip := n.IP
	if !p.spec.HostNetwork {
		if n.nextIP >= len(n.PodIPs) {
			n.mu.Unlock()
			return nil, fmt.Errorf("no pod IP left")
		}
		ip = n.PodIPs[n.nextIP]
		n.nextIP++
	}
	n.mu.Unlock()
	p.ip = ip
	if !p.spec.HostNetwork && n.AddAddress != nil {
		if err := n.AddAddress(ip); err != nil {
			return nil, err
		}
	}
	p.dir = filepath.Join(n.Dir, "pods", p.name)
	p.hostsFile = filepath.Join(p.dir, "hosts")
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.hostsFile, []byte(n.hosts(ctx)), 0o644); err != nil {
		return nil, err
	}
	if err := p.prepareVolumes(ctx); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	p.ctx, p.cancel = pctx, cancel
	n.logf("deployment %s: starting pod %s on %s", d.Name, p.name, p.ip)
	go p.run(pctx)
	return p, nil
}

// writeStatus is the deployment controller's part: the Deployment's generation runs with one
// replica, available once its pod is ready.
func (n *Node) writeStatus(ctx context.Context, d *appsv1.Deployment) error {
	n.mu.Lock()
	p := n.pods[d.Name]
	n.mu.Unlock()
	st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1}
	progressing := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}
	available := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}
	switch {
	case d.Spec.Replicas != nil && *d.Spec.Replicas == 0:
		// Nothing to run: as available as it is asked to be.
		st.Replicas, st.UpdatedReplicas = 0, 0
		progressing.Reason = "NewReplicaSetAvailable"
		available.Status, available.Reason = corev1.ConditionTrue, "MinimumReplicasAvailable"
	case p != nil && p.ready.Load():
		st.ReadyReplicas, st.AvailableReplicas = 1, 1
		progressing.Reason = "NewReplicaSetAvailable"
		available.Status, available.Reason = corev1.ConditionTrue, "MinimumReplicasAvailable"
	default:
		st.UnavailableReplicas = 1
	}
	st.Conditions = []appsv1.DeploymentCondition{available, progressing}
	// Keep the stored times: only what changed is news.
	for i := range st.Conditions {
		for _, old := range d.Status.Conditions {
			if old.Type == st.Conditions[i].Type && old.Status == st.Conditions[i].Status && old.Reason == st.Conditions[i].Reason {
				st.Conditions[i].LastTransitionTime, st.Conditions[i].LastUpdateTime = old.LastTransitionTime, old.LastUpdateTime
			}
		}
		if st.Conditions[i].LastTransitionTime.IsZero() {
			now := metav1.Now()
			st.Conditions[i].LastTransitionTime, st.Conditions[i].LastUpdateTime = now, now
		}
	}
	if equality.Semantic.DeepEqual(st, d.Status) {
		return nil
	}
	d.Status = st
	if err := n.Client.Status().Update(ctx, d); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status of deployment %s: %w", d.Name, err)
	}
	return nil
}

// podsFor are the pods a selector picks.
func (n *Node) podsFor(selector map[string]string) []*pod {
	if len(selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(selector)
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*pod
	for _, p := range n.pods {
		if sel.Matches(labels.Set(p.labels)) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *pod) int { return strings.Compare(a.name, b.name) })
	return out
}

// hosts is /etc/hosts for the pods: the namespace's Services resolve to the pods behind them (no
// service proxy here; every Service in these tests maps its port to the same target port).
func (n *Node) hosts(ctx context.Context) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n")
	var svcs corev1.ServiceList
	if err := n.Client.List(ctx, &svcs, client.InNamespace(n.Namespace)); err != nil {
		return b.String()
	}
	for _, s := range svcs.Items {
		pods := n.podsFor(s.Spec.Selector)
		if len(pods) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s\t%s.%s.svc %s.%s.svc.cluster.local\n", pods[0].ip, s.Name, s.Namespace, s.Name, s.Namespace)
	}
	return b.String()
}

// syncServices writes the EndpointSlices of the Services (the API server routes webhook calls
// through them with --enable-aggregator-routing) and refreshes the pods' /etc/hosts.
func (n *Node) syncServices(ctx context.Context) error {
	var svcs corev1.ServiceList
	if err := n.Client.List(ctx, &svcs, client.InNamespace(n.Namespace)); err != nil {
		return err
	}
	for i := range svcs.Items {
		if err := n.endpointSlice(ctx, &svcs.Items[i]); err != nil {
			return err
		}
		for _, p := range n.podsFor(svcs.Items[i].Spec.Selector) {
			p.forward(p.ctx, &svcs.Items[i])
		}
	}
	hosts := n.hosts(ctx)
	n.mu.Lock()
	pods := slices.Collect(func(yield func(*pod) bool) {
		for _, p := range n.pods {
			if !yield(p) {
				return
			}
		}
	})
	n.mu.Unlock()
	for _, p := range pods {
		old, _ := os.ReadFile(p.hostsFile)
		if string(old) == hosts {
			continue
		}
		// In place: the containers see the file through a bind mount of this inode.
		f, err := os.OpenFile(p.hostsFile, os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(hosts)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) endpointSlice(ctx context.Context, s *corev1.Service) error {
	pods := n.podsFor(s.Spec.Selector)
	if len(pods) == 0 {
		return nil
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-kubelet",
		Labels: map[string]string{discoveryv1.LabelServiceName: s.Name, discoveryv1.LabelManagedBy: "metalforge-test-kubelet"}}}
	err := n.Client.Get(ctx, client.ObjectKeyFromObject(slice), slice)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	exists := err == nil
	before := slice.DeepCopy()
	slice.AddressType = discoveryv1.AddressTypeIPv4
	if a, err := netip.ParseAddr(pods[0].ip); err == nil && a.Is6() {
		slice.AddressType = discoveryv1.AddressTypeIPv6
	}
	slice.Endpoints = nil
	for _, p := range pods {
		ready := p.ready.Load()
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName: &n.Name, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.namespace, Name: p.name, UID: types.UID(p.uid)}})
	}
	slice.Ports = nil
	for _, sp := range s.Spec.Ports {
		port := targetPort(pods[0], sp)
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: &sp.Name, Port: &port, Protocol: &sp.Protocol})
	}
	switch {
	case !exists:
		return n.Client.Create(ctx, slice)
	case !equality.Semantic.DeepEqual(before, slice):
		return n.Client.Update(ctx, slice)
	}
	return nil
}

// targetPort resolves a Service port's target against the pod's containers.
func targetPort(p *pod, sp corev1.ServicePort) int32 {
	tp := sp.TargetPort
	if tp.Type == intstr.Int {
		if tp.IntVal == 0 {
			return sp.Port
		}
		return tp.IntVal
	}
	for _, c := range p.spec.Containers {
		if port, err := containerPort(c, tp); err == nil {
			return int32(port) //nolint:gosec // a port number
		}
	}
	return sp.Port
}

// AddLoopbackAddress puts ip on the loopback interface (for Node.AddAddress, in a network
// namespace of the test's own).
func AddLoopbackAddress(ip string) error {
	bits := "32"
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
		bits = "128"
	}
	out, err := exec.Command("ip", "addr", "add", ip+"/"+bits, "dev", "lo").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "File exists") {
		return fmt.Errorf("ip addr add %s: %w: %s", ip, err, out)
	}
	return nil
}
