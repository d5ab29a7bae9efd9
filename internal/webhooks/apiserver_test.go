package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// These tests go through the real API server: each write is admitted (or not) by the webhook
// configuration generated from this package's markers, calling the manager's webhook server.

// requireRejected fails unless err is the webhook's Invalid response naming every one of fields
// and containing detail.
func requireRejected(t *testing.T, err error, webhookName string, fields []string, detail string) {
	t.Helper()
	if err == nil {
		t.Fatalf("write succeeded, want it rejected by %s naming %v", webhookName, fields)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error is not Invalid (422): %v", err)
	}
	msg := err.Error()
	// The prefix proves the webhook decided, not the CRD schema.
	if !strings.Contains(msg, `admission webhook "`+webhookName+`" denied the request`) {
		t.Fatalf("not rejected by webhook %s: %v", webhookName, err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("no status details in %v", err)
	}
	causes := map[string]bool{}
	for _, c := range status.Status().Details.Causes {
		causes[c.Field] = true
	}
	for _, f := range fields {
		if !causes[f] || !strings.Contains(msg, f+":") {
			t.Errorf("rejection does not name %s: %v", f, err)
		}
	}
	if len(causes) != len(fields) {
		t.Errorf("rejection names %d fields, want %v: %v", len(causes), fields, err)
	}
	if detail != "" && !strings.Contains(msg, detail) {
		t.Errorf("rejection does not say %q: %v", detail, err)
	}
}

// TestSamplesPassWebhooks applies every object of config/samples, the full metal3-style
// BareMetalHost among them, through the webhooks.
func TestSamplesPassWebhooks(t *testing.T) {
	env := webhookEnv(t)
	ns := env.Namespace(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "metal3_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	ctx := context.Background()
	created := map[string]bool{}
	for _, file := range files {
		for _, obj := range readObjects(t, file) {
			mapping, err := env.Client.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				obj.SetNamespace(ns)
			}
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Errorf("%s: creating %s %s: %v", filepath.Base(file), obj.GetKind(), obj.GetName(), err)
				continue
			}
			created[obj.GetKind()] = true
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
		}
	}
	for _, kind := range []string{"BareMetalHost", "BMCEventSubscription", "HostFirmwareComponents", "Provisioning"} {
		if !created[kind] {
			t.Errorf("no %s sample was created", kind)
		}
	}

	host := &metal3.BareMetalHost{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "worker-0"}, host); err != nil {
		t.Fatal(err)
	}
	if len(host.Spec.RAID.HardwareRAIDVolumes) != 2 || host.Spec.Image.Checksum == "" || host.Spec.UserData.Name == "" {
		t.Errorf("stored host lost fields: %+v", host.Spec)
	}
}

// TestDefaultsWithoutMutatingWebhook backs the choice of no mutating webhook: the defaults metal3
// has come from the CRD schema, so a host that leaves them out still gets them.
func TestDefaultsWithoutMutatingWebhook(t *testing.T) {
	env := webhookEnv(t)
	ctx := context.Background()
	host := &metal3.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: env.Namespace(t)},
		Spec: metal3.BareMetalHostSpec{
			BMC:            metal3.BMCDetails{Address: "ipmi://10.0.0.1", CredentialsName: "minimal-bmc"},
			BootMACAddress: "00:5a:91:3f:9a:01",
			Online:         true,
		},
	}
	if err := env.Client.Create(ctx, host); err != nil {
		t.Fatal(err)
	}
	// metal3's schema defaults automatedCleaningMode; bootMode has none there (empty means UEFI).
	if host.Spec.BootMode != "" || host.Spec.AutomatedCleaningMode != metal3.CleaningModeMetadata {
		t.Errorf("bootMode %q, automatedCleaningMode %q; want metal3's schema: bootMode left empty, automatedCleaningMode %q",
			host.Spec.BootMode, host.Spec.AutomatedCleaningMode, metal3.CleaningModeMetadata)
	}
}

func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func TestBareMetalHostCreateRejected(t *testing.T) {
	env := webhookEnv(t)
	ns := env.Namespace(t)
	tests := map[string]struct {
		mutate func(*metal3.BareMetalHost)
		fields []string
		detail string
	}{
		"name is a UUID": {
			mutate: func(h *metal3.BareMetalHost) { h.Name = "2c2b1e16-4f4c-4b43-9d58-0c5ac29ccfe2" },
			fields: []string{"metadata.name"}, detail: "cannot be a UUID",
		},
		"unknown BMC scheme": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "foo://10.0.0.1" },
			fields: []string{"spec.bmc.address"}, detail: "supported: ipmi",
		},
		"BMC credentials in the address are not echoed": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address = "redfish://admin:s3cr3t@10.0.0.1/redfish/v1/Systems/1"
			},
			fields: []string{"spec.bmc.address"}, detail: "<redacted>@",
		},
		"libvirt without boot MAC": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address, h.Spec.BootMACAddress, h.Spec.RAID = "libvirt://192.168.122.1:6233/", "", nil
			},
			fields: []string{"spec.bootMACAddress"}, detail: "requires bootMACAddress",
		},
		"secure boot on IPMI": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.BMC.Address, h.Spec.BootMode, h.Spec.RAID = "ipmi://10.0.0.1", metal3.UEFISecureBoot, nil
			},
			fields: []string{"spec.bootMode"}, detail: "does not support secure boot",
		},
		"hardware RAID on IPMI": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = "ipmi://10.0.0.1" },
			fields: []string{"spec.raid.hardwareRAIDVolumes"}, detail: "does not support hardware RAID",
		},
		// Seven bytes match the CRD's unanchored pattern; only the webhook catches it.
		"boot MAC with seven bytes": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00:5a:91:3f:9a:bd:01" },
			fields: []string{"spec.bootMACAddress"}, detail: "xx:xx:xx:xx:xx:xx",
		},
		"user data in another namespace": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.UserData.Namespace = "kube-system" },
			fields: []string{"spec.userData.namespace"}, detail: "cross-namespace",
		},
		"image without checksum": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.Checksum = "" },
			fields: []string{"spec.image.checksum"}, detail: "live-iso",
		},
		"image URL not a URL": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Image.URL = "rhcos.qcow2" },
			fields: []string{"spec.image.url"}, detail: "absolute",
		},
		"hardware and software RAID": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID.SoftwareRAIDVolumes = []metal3.SoftwareRAIDVolume{{Level: "1"}}
			},
			fields: []string{"spec.raid.softwareRAIDVolumes"}, detail: "not both",
		},
		"two software RAID root volumes": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID = &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{
					{Level: "1", RootVolume: true}, {Level: "0", RootVolume: true},
				}}
			},
			fields: []string{"spec.raid.softwareRAIDVolumes[1].rootVolume"}, detail: "only one",
		},
		"hardware RAID disks without controller": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.RAID.HardwareRAIDVolumes[0].PhysicalDisks = []string{"Disk.Bay.0", "Disk.Bay.1"}
			},
			fields: []string{"spec.raid.hardwareRAIDVolumes[0].controller"}, detail: "physicalDisks",
		},
		"deprecated firmware": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Firmware = &metal3.FirmwareConfig{SriovEnabled: ptr(true)} },
			fields: []string{"spec.firmware"}, detail: "no longer supported, use HostFirmwareSettings",
		},
		"root device not under /dev": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.RootDeviceHints.DeviceName = "sda" },
			fields: []string{"spec.rootDeviceHints.deviceName"}, detail: "/dev/",
		},
		"offline with power off disabled": {
			mutate: func(h *metal3.BareMetalHost) { h.Spec.Online, h.Spec.DisablePowerOff = false, true },
			fields: []string{"spec.disablePowerOff"}, detail: "online",
		},
		"inspection mode contradicts annotation": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Spec.InspectionMode = metal3.InspectionModeAgent
				h.Annotations = map[string]string{metal3.InspectAnnotationPrefix: "disabled"}
			},
			fields: []string{"spec.inspectionMode"}, detail: "contradicts",
		},
		"reboot annotation not JSON": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{"reboot.metal3.io/remediation": "hard"}
			},
			fields: []string{"metadata.annotations[reboot.metal3.io/remediation]"}, detail: `"mode": "hard"|"soft"`,
		},
		"detached annotation with an unknown action": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"keep"}`}
			},
			fields: []string{"metadata.annotations[baremetalhost.metal3.io/detached]"}, detail: `"delay" or "delete"`,
		},
		"inspect annotation with an unknown value": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{metal3.InspectAnnotationPrefix: "enabled"}
			},
			fields: []string{"metadata.annotations[inspect.metal3.io]"}, detail: `"disabled"`,
		},
		"hardware details while inspection is enabled": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{metal3.HardwareDetailsAnnotation: `{"ramMebibytes":65536}`}
			},
			fields: []string{"metadata.annotations[inspect.metal3.io/hardwaredetails]"}, detail: "inspection is disabled",
		},
		"status annotation with an unknown error type": {
			mutate: func(h *metal3.BareMetalHost) {
				h.Annotations = map[string]string{metal3.StatusAnnotation: `{"operationalStatus":"error","errorType":"disk error"}`}
			},
			fields: []string{"metadata.annotations[baremetalhost.metal3.io/status]"}, detail: `"servicing error"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := validHost()
			host.Namespace = ns
			host.Spec.UserData.Namespace, host.Spec.MetaData.Namespace = ns, ns
			tc.mutate(host)
			err := env.Client.Create(context.Background(), host)
			requireRejected(t, err, "baremetalhost.metal3.io", tc.fields, tc.detail)
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("rejection echoes the BMC password: %v", err)
			}
		})
	}
}

// TestBareMetalHostUpdates walks a registered host through updates a user and the controllers
// make, and the ones the webhook refuses.
func TestBareMetalHostUpdates(t *testing.T) {
	env := webhookEnv(t)
	ns := env.Namespace(t)
	ctx := context.Background()

	host := validHost()
	host.Namespace = ns
	host.Spec.UserData.Namespace, host.Spec.MetaData.Namespace = ns, ns
	if err := env.Client.Create(ctx, host); err != nil {
		t.Fatalf("creating a valid host: %v", err)
	}
	setState := func(state metal3.ProvisioningState, opStatus metal3.OperationalStatus) {
		t.Helper()
		host.Status = metal3.BareMetalHostStatus{
			OperationalStatus: opStatus,
			Provisioning:      metal3.ProvisionStatus{State: state, ID: "2c2b1e16-4f4c-4b43-9d58-0c5ac29ccfe2"},
			PoweredOn:         true,
			LastUpdated:       &metav1.Time{Time: metav1.Now().Rfc3339Copy().Time},
		}
		if err := env.Client.Status().Update(ctx, host); err != nil {
			t.Fatalf("writing status %s/%s: %v", state, opStatus, err)
		}
	}
	update := func(mutate func(*metal3.BareMetalHost)) error {
		t.Helper()
		changed := host.DeepCopy()
		mutate(changed)
		err := env.Client.Update(ctx, changed)
		if err == nil {
			host = changed
		}
		return err
	}
	setState(metal3.StateAvailable, metal3.OperationalStatusOK)

	// What users and controllers change on a registered host.
	if err := update(func(h *metal3.BareMetalHost) {
		h.Spec.Online = false
		h.Spec.Image.URL = "http://172.22.0.1/images/rhcos-2.qcow2"
		h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Name: "worker-0", Namespace: ns}
		h.Spec.BMC.CredentialsName = "worker-0-bmc-secret-rotated"
		h.Spec.BootMACAddress = strings.ToUpper(h.Spec.BootMACAddress)
		h.Annotations = map[string]string{"reboot.metal3.io/remediation": `{"mode":"hard"}`}
		h.Finalizers = []string{metal3.BareMetalHostFinalizer}
	}); err != nil {
		t.Fatalf("allowed update of a registered host refused: %v", err)
	}

	err := update(func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.9/redfish/v1/Systems/1"
	})
	requireRejected(t, err, "baremetalhost.metal3.io", []string{"spec.bmc.address"}, "detach")

	err = update(func(h *metal3.BareMetalHost) { h.Spec.BootMACAddress = "00:5a:91:3f:9a:be" })
	requireRejected(t, err, "baremetalhost.metal3.io", []string{"spec.bootMACAddress"}, "cannot be changed once set")

	err = update(func(h *metal3.BareMetalHost) { h.Spec.RootDeviceHints.DeviceName = "sdb" })
	requireRejected(t, err, "baremetalhost.metal3.io", []string{"spec.rootDeviceHints.deviceName"}, "/dev/")

	setState(metal3.StateProvisioned, metal3.OperationalStatusOK)
	err = update(func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true })
	requireRejected(t, err, "baremetalhost.metal3.io", []string{"spec.externallyProvisioned"}, `the host is "provisioned"`)

	// Detached: the BMC address may change.
	setState(metal3.StateProvisioned, metal3.OperationalStatusDetached)
	if err := update(func(h *metal3.BareMetalHost) {
		h.Annotations[metal3.DetachedAnnotation] = `{"deleteAction":"delay"}`
		h.Spec.BMC.Address = "redfish-virtualmedia://192.168.111.9/redfish/v1/Systems/1"
	}); err != nil {
		t.Fatalf("BMC address change of a detached host refused: %v", err)
	}

	// Registering: it may change again (fixing a typo while registration fails).
	setState(metal3.StateRegistering, metal3.OperationalStatusError)
	if err := update(func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = "idrac-virtualmedia://192.168.111.9/redfish/v1/Systems/System.Embedded.1"
	}); err != nil {
		t.Fatalf("BMC address change while registering refused: %v", err)
	}

	setState(metal3.StateAvailable, metal3.OperationalStatusOK)
	if err := update(func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true }); err != nil {
		t.Fatalf("externallyProvisioned turned on while available refused: %v", err)
	}

	got := &metal3.BareMetalHost{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(host), got); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.ExternallyProvisioned || !strings.HasPrefix(got.Spec.BMC.Address, "idrac-virtualmedia://") || got.Spec.Online {
		t.Errorf("stored host does not have the allowed updates: %+v", got.Spec)
	}
}

func TestProvisioningWebhook(t *testing.T) {
	env := webhookEnv(t)
	ctx := context.Background()

	misnamed := managedProvisioning()
	misnamed.Name = "my-provisioning"
	requireRejected(t, env.Client.Create(ctx, misnamed), "provisioning.metal3.io", []string{"metadata.name"}, "singleton")

	inRange := managedProvisioning()
	inRange.Spec.ProvisioningIP = "172.30.20.20"
	requireRejected(t, env.Client.Create(ctx, inRange), "provisioning.metal3.io", []string{"spec.provisioningIP"}, "outside provisioningDHCPRange")

	ipv6 := managedProvisioning()
	ipv6.Spec.ProvisioningIP, ipv6.Spec.ProvisioningNetworkCIDR, ipv6.Spec.ProvisioningDHCPRange = "fd00:1101::3", "fd00:1101::/48", "fd00:1101::a,fd00:1101::ff"
	requireRejected(t, env.Client.Create(ctx, ipv6), "provisioning.metal3.io", []string{"spec.provisioningNetworkCIDR"}, "/64")

	badURL := managedProvisioning()
	badURL.Spec.ProvisioningOSDownloadURL = "http://172.22.0.1/images/rhcos.qcow2.gz"
	requireRejected(t, env.Client.Create(ctx, badURL), "provisioning.metal3.io", []string{"spec.provisioningOSDownloadURL"}, "sha256")

	prov := managedProvisioning()
	if err := env.Client.Create(ctx, prov); err != nil {
		t.Fatalf("creating a valid Provisioning: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), prov) })

	changed := prov.DeepCopy()
	changed.Spec.ProvisioningNetwork = metal3.ProvisioningNetworkUnmanaged
	changed.Spec.ProvisioningNetworkGateway = "172.30.20.1"
	requireRejected(t, env.Client.Update(ctx, changed), "provisioning.metal3.io", []string{"spec.provisioningNetworkGateway"}, "Managed")

	changed = prov.DeepCopy()
	changed.Spec.ProvisioningNetwork = metal3.ProvisioningNetworkDisabled
	changed.Spec.ProvisioningDHCPRange, changed.Spec.ProvisioningInterface = "", ""
	if err := env.Client.Update(ctx, changed); err != nil {
		t.Fatalf("switching to Disabled refused: %v", err)
	}
}

func TestHostFirmwareComponentsWebhook(t *testing.T) {
	env := webhookEnv(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	newHFC := func(updates ...metal3.FirmwareUpdate) *metal3.HostFirmwareComponents {
		return &metal3.HostFirmwareComponents{
			ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: ns},
			Spec:       metal3.HostFirmwareComponentsSpec{Updates: updates},
		}
	}
	const url = "https://firmware.example.com/bios.exe"

	requireRejected(t, env.Client.Create(ctx, newHFC(metal3.FirmwareUpdate{Component: "cpld", URL: url})),
		"hostfirmwarecomponents.metal3.io", []string{"spec.updates[0].component"}, `"bmc", "bios" or "nic:<id>"`)
	requireRejected(t, env.Client.Create(ctx, newHFC(metal3.FirmwareUpdate{Component: "bmc", URL: "ftp://firmware.example.com/bmc.bin"})),
		"hostfirmwarecomponents.metal3.io", []string{"spec.updates[0].url"}, "https://")

	hfc := newHFC(metal3.FirmwareUpdate{Component: "bios", URL: url}, metal3.FirmwareUpdate{Component: "nic:NIC.Slot.1-1", URL: url})
	if err := env.Client.Create(ctx, hfc); err != nil {
		t.Fatalf("creating valid HostFirmwareComponents: %v", err)
	}
	hfc.Spec.Updates = append(hfc.Spec.Updates, metal3.FirmwareUpdate{Component: "nic", URL: url})
	requireRejected(t, env.Client.Update(ctx, hfc), "hostfirmwarecomponents.metal3.io", []string{"spec.updates[2].component"}, "nic:<id>")
}

// TestDataImageWebhook: a DataImage with an unusable URL is refused at admission, as by metal3, and
// so is an edit that makes a good one unusable.
func TestDataImageWebhook(t *testing.T) {
	env := webhookEnv(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	di := &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: ns}, Spec: metal3.DataImageSpec{URL: "ftp://images.example.com/config.iso"}}
	requireRejected(t, env.Client.Create(ctx, di), "dataimage.metal3.io", []string{"spec.url"}, `not a "ftp" URL`)
	di.Spec.URL = "https://images.example.com/config.iso"
	if err := env.Client.Create(ctx, di); err != nil {
		t.Fatalf("creating a valid DataImage: %v", err)
	}
	di.Spec.URL = "images.example.com/config.iso"
	requireRejected(t, env.Client.Update(ctx, di), "dataimage.metal3.io", []string{"spec.url"}, "https://")
}

func TestBMCEventSubscriptionWebhook(t *testing.T) {
	env := webhookEnv(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	newSub := func() *metal3.BMCEventSubscription {
		s := validSubscription()
		s.Namespace, s.Spec.HTTPHeadersRef.Namespace = ns, ns
		return s
	}

	noHost := newSub()
	noHost.Spec.HostName = ""
	requireRejected(t, env.Client.Create(ctx, noHost), "bmceventsubscription.metal3.io", []string{"spec.hostName"}, "BareMetalHost")

	hostOnly := newSub()
	hostOnly.Spec.Destination = "https://events.example.com"
	requireRejected(t, env.Client.Create(ctx, hostOnly), "bmceventsubscription.metal3.io", []string{"spec.destination"}, "trailing slash")

	otherNS := newSub()
	otherNS.Spec.HTTPHeadersRef.Namespace = "kube-system"
	requireRejected(t, env.Client.Create(ctx, otherNS), "bmceventsubscription.metal3.io", []string{"spec.httpHeadersRef.namespace"}, "cross-namespace")

	sub := newSub()
	if err := env.Client.Create(ctx, sub); err != nil {
		t.Fatalf("creating a valid subscription: %v", err)
	}
	sub.Finalizers = []string{metal3.BMCEventSubscriptionFinalizer}
	if err := env.Client.Update(ctx, sub); err != nil {
		t.Fatalf("adding a finalizer refused: %v", err)
	}
	sub.Spec.Destination = "https://other.example.com/events"
	requireRejected(t, env.Client.Update(ctx, sub), "bmceventsubscription.metal3.io", []string{"spec"}, "delete the subscription and create a new one")
}
