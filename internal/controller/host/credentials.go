package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// errSecretNotFound: the Secret a host names does not exist.
var errSecretNotFound = errors.New("secret not found")

// secrets reads the Secrets hosts use. The manager caches only Secrets labelled
// environment.metal3.io=baremetal, so memory does not grow with the cluster's other Secrets. A
// Secret not in that cache yet is labelled and given the secret finalizer in ONE patch that also
// returns it; from then on the cache has it and its changes wake the hosts that use it (through
// the index on secretNamesField).
type secrets struct {
	client client.Client // cached (label-filtered) reads, writes
	reader client.Reader // uncached reads
}

// get returns the Secret, labelled and finalized when adopt is set. A Secret missing from the
// (label-filtered) cache is labelled and finalized with one strategic merge patch, whose response
// carries the Secret: no read first, and other finalizers and labels are kept (finalizers merge
// as a set). A deleting host only reads (it must not take a Secret it is about to release).
func (m secrets) get(ctx context.Context, key types.NamespacedName, adopt bool) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := m.client.Get(ctx, key, secret)
	if err == nil && (managed(secret) || !adopt) {
		return secret, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading secret %s: %w", key, err)
	}
	if !adopt {
		if err := m.reader.Get(ctx, key, secret); apierrors.IsNotFound(err) {
			return nil, errSecretNotFound
		} else if err != nil {
			return nil, fmt.Errorf("reading secret %s: %w", key, err)
		}
		return secret, nil
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := m.client.Patch(ctx, secret, client.RawPatch(types.StrategicMergePatchType, adoptSecretPatch)); apierrors.IsNotFound(err) {
		return nil, errSecretNotFound
	} else if err != nil {
		return nil, fmt.Errorf("labelling secret %s: %w", key, err)
	}
	return secret, nil
}

// getExisting is get with adopt for a Secret the host may need later but does not use now: a
// Secret missing from the cache is read first and labelled and finalized only if it exists, so
// that a host naming a missing Secret sends no failing patch at every reconcile.
func (m secrets) getExisting(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	secret, err := m.get(ctx, key, false)
	if err != nil || managed(secret) {
		return secret, err
	}
	return m.get(ctx, key, true)
}

// adoptSecretPatch labels a Secret for the operator's cache and adds the secret finalizer.
var adoptSecretPatch = []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"finalizers":[%q]}}`,
	metal3.EnvironmentLabel, metal3.EnvironmentLabelValue, metal3.SecretsFinalizer))

func managed(s *corev1.Secret) bool {
	return s.Labels[metal3.EnvironmentLabel] == metal3.EnvironmentLabelValue &&
		controllerutil.ContainsFinalizer(s, metal3.SecretsFinalizer)
}

// loadInputs reads what the handlers will need: BMC credentials, the agent image, user/network/meta
// data and pending firmware changes. Bad input lands in s.in (the handlers turn it into a status
// error naming the field); only API failures are returned.
func (r *Reconciler) loadInputs(ctx context.Context, s *hostScope) error {
	if err := r.loadCredentials(ctx, s); err != nil {
		return err
	}
	if err := r.loadAgentImage(ctx, s); err != nil {
		return err
	}
	if err := r.loadPreprovNetworkData(ctx, s); err != nil {
		return err
	}
	if needsHostConfig(s) {
		if err := r.loadHostConfig(ctx, s); err != nil {
			return err
		}
	}
	row := stateOf(s.state())
	if row.mayPrepare.is() || row.liveUpdates.is() {
		if err := r.loadFirmwareChanges(ctx, s); err != nil {
			return err
		}
	}
	if row.liveUpdates.is() {
		if err := r.loadUpdatePolicy(ctx, s); err != nil {
			return err
		}
		if err := r.loadDataImage(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// loadPreprovNetworkData reads spec.preprovisioningNetworkDataName: its content for the provisioner
// (without an image builder it becomes the node's network data) and its version, which the agent
// image must have been built from. It is read in every state where the host may be registered
// (again): a node the provisioner lost after provisioning (Ironic's database, a pivot) is enrolled
// anew there, and without its network data the agent that later cleans it boots without its
// static network. Only a host leaving the provisioner (deleting) skips it. A missing Secret or
// key is not an error here: without a builder the provisioner gets no network data, with one the
// image builder reports the missing Secret.
func (r *Reconciler) loadPreprovNetworkData(ctx context.Context, s *hostScope) error {
	h := s.host
	name := h.Spec.PreprovisioningNetworkDataName
	row := stateOf(s.state())
	registers := !row.pastProvisioning.is() || row.registered.is()
	usesImage := s.imagesUsed() && row.agentImage(h).needed()
	if name == "" || (!registers && !usesImage) {
		return nil
	}
	key := types.NamespacedName{Namespace: h.Namespace, Name: name}
	var secret *corev1.Secret
	var err error
	if row.pastProvisioning.is() && !usesImage && h.DeletionTimestamp.IsZero() {
		// Used only if the host registers again (a lost node): taken when it exists, and a
		// missing one costs a read, not a failing write, at every reconcile.
		secret, err = r.secrets.getExisting(ctx, key)
	} else {
		secret, err = r.secrets.get(ctx, key, h.DeletionTimestamp.IsZero())
	}
	if errors.Is(err, errSecretNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.in.preprovNetworkDataVersion = secret.ResourceVersion
	s.in.preprovNetworkData, _ = secretKey(secret, "networkData")
	return nil
}

func (r *Reconciler) loadCredentials(ctx context.Context, s *hostScope) error {
	h := s.host
	if !h.HasBMCDetails() {
		return nil
	}
	if _, err := bmc.Parse(h.Spec.BMC.Address); err != nil {
		s.in.bmcErr = bmcInputError("spec.bmc.address", err)
		return nil
	}
	name := h.Spec.BMC.CredentialsName
	if name == "" {
		s.in.bmcErr = errors.New("spec.bmc.credentialsName: missing; name a Secret with the keys username and password")
		return nil
	}
	secret, err := r.secrets.get(ctx, h.CredentialsKey(), h.DeletionTimestamp.IsZero())
	if errors.Is(err, errSecretNotFound) {
		s.in.bmcErr = fmt.Errorf("spec.bmc.credentialsName: secret %q not found", name)
		return nil
	}
	if err != nil {
		return err
	}
	user := strings.TrimSpace(string(secret.Data["username"]))
	pass := strings.TrimSpace(string(secret.Data["password"]))
	var missing []string
	if user == "" {
		missing = append(missing, "username")
	}
	if pass == "" {
		missing = append(missing, "password")
	}
	if len(missing) > 0 {
		s.in.bmcErr = fmt.Errorf("spec.bmc.credentialsName: secret %q has no %s", name, strings.Join(missing, " or "))
		return nil
	}
	s.in.creds = provisioner.Credentials{Username: user, Password: pass}
	s.in.credsRef = &corev1.SecretReference{Name: secret.Name, Namespace: secret.Namespace}
	s.in.credsVersion = secret.ResourceVersion
	return nil
}

// needsHostConfig: the host may start provisioning in this reconcile.
func needsHostConfig(s *hostScope) bool {
	spec := s.host.Spec
	return (spec.Image != nil || spec.CustomDeploy != nil) && !stateOf(s.state()).pastProvisioning.is()
}

func (r *Reconciler) loadHostConfig(ctx context.Context, s *hostScope) error {
	h := s.host
	var cfg provisioner.HostConfig
	var errs []error
	read := func(field string, ref *corev1.SecretReference, key string, into *string, optionalKey bool) {
		if ref == nil || ref.Name == "" {
			return
		}
		v, err := r.secretValue(ctx, h, field, ref, key)
		var missing missingKeyError
		if optionalKey && errors.As(err, &missing) {
			return // metal3: network data without the key is no network data
		}
		if err != nil {
			errs = append(errs, err)
			return
		}
		*into = v
	}
	network := h.Spec.NetworkData
	networkField := "spec.networkData"
	if network == nil && h.Spec.PreprovisioningNetworkDataName != "" {
		// A Secret made for an image builder holds nmstate (key "nmstate"), not network data.
		network = &corev1.SecretReference{Name: h.Spec.PreprovisioningNetworkDataName}
		networkField = "spec.preprovisioningNetworkDataName"
	}
	read("spec.userData", h.Spec.UserData, "userData", &cfg.UserData, false)
	read(networkField, network, "networkData", &cfg.NetworkData, true)
	read("spec.metaData", h.Spec.MetaData, "metaData", &cfg.MetaData, false)
	// The provisioner parses these too; parsed here, bad data is the user's input error, found
	// before provisioning, instead of a failed attempt that counts towards the retry cap.
	parse := func(field string, ref *corev1.SecretReference, data string) {
		if _, err := provisioner.ParseConfigData(data); err != nil {
			errs = append(errs, inputError{fmt.Sprintf("%s: secret %q: %v", field, ref.Name, err)})
		}
	}
	parse(networkField, network, cfg.NetworkData)
	parse("spec.metaData", h.Spec.MetaData, cfg.MetaData)
	pull, err := r.imagePullSecret(ctx, h)
	if err != nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		if !isInputError(err) {
			return err
		}
	}
	s.in.hostConfig, s.in.hostConfigErr = cfg, errors.Join(errs...)
	s.in.imagePullSecret = pull
	return nil
}

// imagePullSecret reads the registry credentials of an oci:// image from
// spec.image.ociAuthSecretName ("" without one). The Secret is labelled and finalized as the
// host's other Secrets are; a problem with it is an input error naming the field.
func (r *Reconciler) imagePullSecret(ctx context.Context, h *metal3.BareMetalHost) (string, error) {
	img := h.Spec.Image
	if img == nil || img.OCIAuthSecretName == nil || *img.OCIAuthSecretName == "" || !img.IsOCI() {
		return "", nil
	}
	const field = "spec.image.ociAuthSecretName"
	name := *img.OCIAuthSecretName
	secret, err := r.hostSecret(ctx, h, field, &corev1.SecretReference{Name: name})
	if err != nil {
		return "", err
	}
	creds, err := registryCredentials(secret, img.URL)
	if err != nil {
		return "", inputError{fmt.Sprintf("%s: secret %q %v", field, name, err)}
	}
	return creds, nil
}

// inputError is a Secret problem the user fixes; its message names the field.
type inputError struct{ msg string }

func (e inputError) Error() string { return e.msg }

// missingKeyError is an inputError for a Secret without the key (nor "value").
type missingKeyError struct{ inputError }

func isInputError(err error) bool {
	var ie inputError
	var mk missingKeyError
	return errors.As(err, &ie) || errors.As(err, &mk)
}

// hostSecret reads a Secret the host names in field (labelled and finalized while the host is
// not being deleted); it must be in the host's namespace, and its absence is an input error.
func (r *Reconciler) hostSecret(ctx context.Context, h *metal3.BareMetalHost, field string, ref *corev1.SecretReference) (*corev1.Secret, error) {
	ns := ref.Namespace
	if ns == "" {
		ns = h.Namespace
	}
	if ns != h.Namespace {
		return nil, inputError{fmt.Sprintf("%s: secret %q must be in the host's namespace", field, ref.Name)}
	}
	secret, err := r.secrets.get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, h.DeletionTimestamp.IsZero())
	if errors.Is(err, errSecretNotFound) {
		return nil, inputError{fmt.Sprintf("%s: secret %q not found", field, ref.Name)}
	}
	return secret, err
}

// secretValue reads key (falling back to "value") from a Secret in the host's namespace.
func (r *Reconciler) secretValue(ctx context.Context, h *metal3.BareMetalHost, field string, ref *corev1.SecretReference, key string) (string, error) {
	secret, err := r.hostSecret(ctx, h, field, ref)
	if err != nil {
		return "", err
	}
	if v, ok := secretKey(secret, key); ok {
		return v, nil
	}
	return "", missingKeyError{inputError{fmt.Sprintf("%s: secret %q has neither a %q nor a \"value\" key", field, ref.Name, key)}}
}

// secretKey is the Secret's key, falling back to "value" (metal3).
func secretKey(secret *corev1.Secret, key string) (string, bool) {
	if v, ok := secret.Data[key]; ok {
		return string(v), true
	}
	if v, ok := secret.Data["value"]; ok {
		return string(v), true
	}
	return "", false
}

// secretNames are the Secrets a host uses (for the index that maps Secret events to hosts, and
// for releasing the secret finalizer).
func secretNames(h *metal3.BareMetalHost) []string {
	var names []string
	add := func(name string) {
		if name != "" {
			names = append(names, name)
		}
	}
	add(h.Spec.BMC.CredentialsName)
	add(h.Spec.PreprovisioningNetworkDataName)
	if h.Spec.Image != nil && h.Spec.Image.OCIAuthSecretName != nil {
		add(*h.Spec.Image.OCIAuthSecretName)
	}
	for _, ref := range []*corev1.SecretReference{h.Spec.UserData, h.Spec.NetworkData, h.Spec.MetaData} {
		if ref != nil && (ref.Namespace == "" || ref.Namespace == h.Namespace) {
			add(ref.Name)
		}
	}
	return names
}

// releaseSecrets removes the secret finalizer from the named Secrets that no other host uses.
func (r *Reconciler) releaseSecrets(ctx context.Context, h *metal3.BareMetalHost, names []string) error {
	for _, name := range names {
		used, err := namedByAnotherHost(ctx, r.Client, h.Namespace, name, h.UID)
		if err != nil {
			return err
		}
		if used {
			continue
		}
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: name}, secret); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading secret %s: %w", name, err)
		}
		if err := dropSecretFinalizer(ctx, r.Client, secret); err != nil {
			return err
		}
	}
	return nil
}

// namedByAnotherHost reports whether a host of the namespace other than except names the Secret
// (secretNamesField; except "" counts every host).
func namedByAnotherHost(ctx context.Context, c client.Client, namespace, name string, except types.UID) (bool, error) {
	var users metal3.BareMetalHostList
	// Only their UIDs are read: the cache's objects, uncopied.
	if err := c.List(ctx, &users, client.InNamespace(namespace), client.MatchingFields{secretNamesField: name}, cacheview.ReadOnly); err != nil {
		return false, fmt.Errorf("listing hosts using secret %s/%s: %w", namespace, name, err)
	}
	for i := range users.Items {
		if users.Items[i].UID != except {
			return true, nil
		}
	}
	return false, nil
}

// dropSecretFinalizer removes the secret finalizer, and only it, from secret. The optimistic lock
// makes a patch from a stale copy (another finalizer changed since) fail, to be retried.
func dropSecretFinalizer(ctx context.Context, c client.Client, secret *corev1.Secret) error {
	if !controllerutil.ContainsFinalizer(secret, metal3.SecretsFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(secret.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(secret, metal3.SecretsFinalizer)
	if err := c.Patch(ctx, secret, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
