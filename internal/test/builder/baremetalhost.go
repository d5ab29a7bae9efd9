package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// BareMetalHostBuilder builds a BareMetalHost. Each method changes the builder and returns it.
type BareMetalHostBuilder struct {
	host metal3.BareMetalHost
}

// BareMetalHost starts a host that is valid as it is: online, no BMC, no image.
func BareMetalHost(namespace, name string) *BareMetalHostBuilder {
	return &BareMetalHostBuilder{host: metal3.BareMetalHost{
		TypeMeta:   metav1.TypeMeta{APIVersion: metal3.GroupVersion.String(), Kind: "BareMetalHost"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       metal3.BareMetalHostSpec{Online: true},
	}}
}

// Build returns a copy of the host, so one builder can make several objects.
func (b *BareMetalHostBuilder) Build() *metal3.BareMetalHost {
	return b.host.DeepCopy()
}

// WithBMC sets the BMC address and the credentials Secret name.
func (b *BareMetalHostBuilder) WithBMC(address, credentialsName string) *BareMetalHostBuilder {
	b.host.Spec.BMC.Address = address
	b.host.Spec.BMC.CredentialsName = credentialsName
	return b
}

// WithDisableCertificateVerification skips BMC TLS verification.
func (b *BareMetalHostBuilder) WithDisableCertificateVerification() *BareMetalHostBuilder {
	b.host.Spec.BMC.DisableCertificateVerification = true
	return b
}

// WithBootMACAddress sets spec.bootMACAddress.
func (b *BareMetalHostBuilder) WithBootMACAddress(mac string) *BareMetalHostBuilder {
	b.host.Spec.BootMACAddress = mac
	return b
}

// WithOnline sets spec.online.
func (b *BareMetalHostBuilder) WithOnline(online bool) *BareMetalHostBuilder {
	b.host.Spec.Online = online
	return b
}

// WithImage sets spec.image with a URL and a checksum of type "auto".
func (b *BareMetalHostBuilder) WithImage(url, checksum string) *BareMetalHostBuilder {
	b.host.Spec.Image = &metal3.Image{URL: url, Checksum: checksum, ChecksumType: metal3.AutoChecksum}
	return b
}

// WithImageSpec sets spec.image as given.
func (b *BareMetalHostBuilder) WithImageSpec(image metal3.Image) *BareMetalHostBuilder {
	b.host.Spec.Image = image.DeepCopy()
	return b
}

// WithCustomDeploy sets spec.customDeploy.
func (b *BareMetalHostBuilder) WithCustomDeploy(method string) *BareMetalHostBuilder {
	b.host.Spec.CustomDeploy = &metal3.CustomDeploy{Method: method}
	return b
}

// WithBootMode sets spec.bootMode.
func (b *BareMetalHostBuilder) WithBootMode(mode metal3.BootMode) *BareMetalHostBuilder {
	b.host.Spec.BootMode = mode
	return b
}

// WithAutomatedCleaningMode sets spec.automatedCleaningMode.
func (b *BareMetalHostBuilder) WithAutomatedCleaningMode(mode metal3.AutomatedCleaningMode) *BareMetalHostBuilder {
	b.host.Spec.AutomatedCleaningMode = mode
	return b
}

// WithInspectionMode sets spec.inspectionMode.
func (b *BareMetalHostBuilder) WithInspectionMode(mode metal3.InspectionMode) *BareMetalHostBuilder {
	b.host.Spec.InspectionMode = mode
	return b
}

// WithRootDeviceHints sets spec.rootDeviceHints.
func (b *BareMetalHostBuilder) WithRootDeviceHints(hints metal3.RootDeviceHints) *BareMetalHostBuilder {
	b.host.Spec.RootDeviceHints = hints.DeepCopy()
	return b
}

// WithRAID sets spec.raid.
func (b *BareMetalHostBuilder) WithRAID(raid metal3.RAIDConfig) *BareMetalHostBuilder {
	b.host.Spec.RAID = raid.DeepCopy()
	return b
}

// WithUserData references a user data Secret in the host's namespace.
func (b *BareMetalHostBuilder) WithUserData(secretName string) *BareMetalHostBuilder {
	b.host.Spec.UserData = &corev1.SecretReference{Namespace: b.host.Namespace, Name: secretName}
	return b
}

// WithNetworkData references a network data Secret in the host's namespace.
func (b *BareMetalHostBuilder) WithNetworkData(secretName string) *BareMetalHostBuilder {
	b.host.Spec.NetworkData = &corev1.SecretReference{Namespace: b.host.Namespace, Name: secretName}
	return b
}

// WithMetaData references a metadata Secret in the host's namespace.
func (b *BareMetalHostBuilder) WithMetaData(secretName string) *BareMetalHostBuilder {
	b.host.Spec.MetaData = &corev1.SecretReference{Namespace: b.host.Namespace, Name: secretName}
	return b
}

// WithPreprovisioningNetworkData sets spec.preprovisioningNetworkDataName.
func (b *BareMetalHostBuilder) WithPreprovisioningNetworkData(secretName string) *BareMetalHostBuilder {
	b.host.Spec.PreprovisioningNetworkDataName = secretName
	return b
}

// WithConsumerRef marks the host as used by the given object.
func (b *BareMetalHostBuilder) WithConsumerRef(ref corev1.ObjectReference) *BareMetalHostBuilder {
	b.host.Spec.ConsumerRef = ref.DeepCopy()
	return b
}

// WithExternallyProvisioned sets spec.externallyProvisioned.
func (b *BareMetalHostBuilder) WithExternallyProvisioned() *BareMetalHostBuilder {
	b.host.Spec.ExternallyProvisioned = true
	return b
}

// WithArchitecture sets spec.architecture.
func (b *BareMetalHostBuilder) WithArchitecture(arch string) *BareMetalHostBuilder {
	b.host.Spec.Architecture = arch
	return b
}

// WithDisablePowerOff sets spec.disablePowerOff.
func (b *BareMetalHostBuilder) WithDisablePowerOff() *BareMetalHostBuilder {
	b.host.Spec.DisablePowerOff = true
	return b
}

// WithLabel adds a label.
func (b *BareMetalHostBuilder) WithLabel(key, value string) *BareMetalHostBuilder {
	if b.host.Labels == nil {
		b.host.Labels = map[string]string{}
	}
	b.host.Labels[key] = value
	return b
}

// WithAnnotation adds an annotation (e.g. metal3.PausedAnnotation).
func (b *BareMetalHostBuilder) WithAnnotation(key, value string) *BareMetalHostBuilder {
	if b.host.Annotations == nil {
		b.host.Annotations = map[string]string{}
	}
	b.host.Annotations[key] = value
	return b
}

// WithFinalizer adds a finalizer.
func (b *BareMetalHostBuilder) WithFinalizer(finalizer string) *BareMetalHostBuilder {
	b.host.Finalizers = append(b.host.Finalizers, finalizer)
	return b
}

// WithStatus sets the status. The API server ignores status on create: write it with
// Status().Update after creating the host.
func (b *BareMetalHostBuilder) WithStatus(status metal3.BareMetalHostStatus) *BareMetalHostBuilder {
	b.host.Status = *status.DeepCopy()
	return b
}
