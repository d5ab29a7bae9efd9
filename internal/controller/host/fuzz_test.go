package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8sevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/webhooks"
)

// The annotations the fuzzer may set (chosen by a byte), each with a payload of its choosing.
var fuzzAnnotations = []string{
	metal3.RebootAnnotationPrefix, metal3.RebootAnnotationPrefix + "/remediation", metal3.DetachedAnnotation,
	metal3.InspectAnnotationPrefix, metal3.HardwareDetailsAnnotation, metal3.StatusAnnotation, metal3.PausedAnnotation,
}

// fuzzScheme is built once: the fuzzer runs the target thousands of times.
var fuzzScheme = scheme.New()

// fuzzPassword is the BMC password of every fuzzed host: it must never reach status or events.
const fuzzPassword = "fuzz-Secret-pw0"

// FuzzHostAdmissionAndReconcile drives random BareMetalHost specs and annotations through
// admission (the webhook's validation) and the controller (two reconciles with the fixture
// provisioner, on a fake API client: a pure unit test of the controller's handling of input).
// No input may panic; every admission rejection names its field; a host the controller finds in
// error says in errorMessage which field is wrong; the BMC password appears nowhere in status or
// events. Objects that admission refuses are reconciled too: they reach the controller when no
// webhook runs.
//
// `go test` runs the seeds below; `make fuzz` (and, for a bounded time, `make test`) fuzzes.
func FuzzHostAdmissionAndReconcile(f *testing.F) {
	seeds := []struct {
		addr, hints, raid, network, firmware, image string
		annotation                                  byte
		payload                                     string
		online                                      bool
	}{
		{"redfish://192.0.2.1/redfish/v1/Systems/1", `{"deviceName":"/dev/sda"}`, `{"softwareRAIDVolumes":[{"level":"1"}]}`,
			"links: []", `{"ProcTurboMode":"Disabled"}`, "http://images/a.qcow2", 0, `{"mode":"hard"}`, true},
		{"ipmi://[fe80::1%eth0]:623", `{"minSizeGigabytes":-5}`, `{"hardwareRAIDVolumes":[{"level":"7","sizeGibibytes":-1}]}`,
			"{{{", `{"":"x"}`, "ftp://images", 2, `{"force":"yes"}`, false},
		{"bogus://", `{"deviceName":"sda"}`, `[]`, "\x00", `[1,2]`, "", 5, `{"operationalStatus":"what"}`, true},
		{"redfish-virtualmedia+https://u:p@bmc.example:8443/redfish/v1/Systems/abc", `{"rotational":true,"hctl":"x:y"}`,
			`{"softwareRAIDVolumes":[{"level":"1"},{"level":"0"},{"level":"1"}]}`, strings.Repeat("a: b\n", 200), `{"X":123}`,
			"http://[::1]/img", 4, `not json`, true},
		{"idrac-virtualmedia://192.0.2.1", strings.Repeat(`{"deviceName":"`, 50), "", "", "", "http://x", 1, `{"mode":"soft"}`, true},
	}
	for _, s := range seeds {
		f.Add(s.addr, s.hints, s.raid, s.network, s.firmware, s.image, s.annotation, s.payload, s.online)
	}
	f.Fuzz(func(t *testing.T, addr, hints, raid, network, firmware, image string, annotation byte, payload string, online bool) {
		host := fuzzHost(addr, hints, raid, image, annotation, payload, online)

		for _, e := range webhooks.ValidateBareMetalHost(host.DeepCopy()) {
			if e.Field == "" || !strings.Contains(e.Error(), e.Field) {
				t.Fatalf("admission error without its field: %q (field %q)", e.Error(), e.Field)
			}
		}

		c := fuzzClient(t, host, network, firmware)
		rec := &k8sevents.FakeRecorder{Events: make(chan string, 100), Verbose: true}
		r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Provisioner: fixture.New(fixture.Config{}), Config: testConfig()}
		r.Config.Now = func() time.Time { return time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) }
		r.secrets = secrets{client: c, reader: c}
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(host)}
		for range 2 {
			// Errors returned are the controller-runtime retry path; only panics and what
			// reaches status matter here.
			_, _ = r.Reconcile(context.Background(), req)
		}

		got := &metal3.BareMetalHost{}
		if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
			t.Fatalf("reading the host back: %v", err)
		}
		st := got.Status
		t.Logf("state %q opStatus %q error %q", st.Provisioning.State, st.OperationalStatus, st.ErrorMessage)
		if st.OperationalStatus == metal3.OperationalStatusError && !namesAField(st.ErrorMessage) {
			t.Fatalf("host in error (%s) without naming the field: %q", st.ErrorType, st.ErrorMessage)
		}
		if blob, _ := json.Marshal(st); strings.Contains(string(blob), fuzzPassword) {
			t.Fatal("the BMC password reached the host's status")
		}
		close(rec.Events)
		for e := range rec.Events {
			if strings.Contains(e, fuzzPassword) {
				t.Fatalf("the BMC password reached an event: %q", e)
			}
		}
	})
}

// namesAField: an input error says which field (or annotation) is wrong.
func namesAField(msg string) bool {
	for _, prefix := range []string{"spec.", "metadata.annotations", "metadata.name"} {
		if strings.Contains(msg, prefix) {
			return true
		}
	}
	return false
}

func fuzzHost(addr, hints, raid, image string, annotation byte, payload string, online bool) *metal3.BareMetalHost {
	h := &metal3.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fuzz", Name: "host-0", Generation: 1, Annotations: map[string]string{}},
		Spec: metal3.BareMetalHostSpec{
			BMC:            metal3.BMCDetails{Address: addr, CredentialsName: "bmc"},
			BootMACAddress: "52:54:00:00:00:01",
			Online:         online,
			NetworkData:    &corev1.SecretReference{Name: "net"},
		},
	}
	h.Spec.PreprovisioningNetworkDataName = "net"
	if hints != "" {
		h.Spec.RootDeviceHints = &metal3.RootDeviceHints{}
		if json.Unmarshal([]byte(hints), h.Spec.RootDeviceHints) != nil {
			h.Spec.RootDeviceHints = &metal3.RootDeviceHints{DeviceName: hints}
		}
	}
	if raid != "" {
		h.Spec.RAID = &metal3.RAIDConfig{}
		if json.Unmarshal([]byte(raid), h.Spec.RAID) != nil {
			h.Spec.RAID = nil
		}
	}
	if image != "" {
		h.Spec.Image = &metal3.Image{URL: image, Checksum: "0123456789abcdef0123456789abcdef", ChecksumType: metal3.MD5}
	}
	key := fuzzAnnotations[int(annotation)%len(fuzzAnnotations)]
	h.Annotations[key] = payload
	return h
}

// fuzzClient is a fake API client holding the host, its BMC Secret, a network data Secret and a
// HostFirmwareSettings whose spec the fuzzer wrote.
func fuzzClient(t *testing.T, host *metal3.BareMetalHost, network, firmware string) client.Client {
	t.Helper()
	settings := metal3.DesiredSettingsMap{}
	if json.Unmarshal([]byte(firmware), &settings) != nil {
		settings = metal3.DesiredSettingsMap{}
	}
	objs := []client.Object{
		host,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fuzz", Name: "bmc"},
			Data: map[string][]byte{"username": []byte("admin"), "password": []byte(fuzzPassword)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fuzz", Name: "net"},
			Data: map[string][]byte{"networkData": []byte(network), "nmstate": []byte(network)}},
		&metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: "fuzz", Name: "host-0"},
			Spec: metal3.HostFirmwareSettingsSpec{Settings: settings}},
	}
	return fake.NewClientBuilder().WithScheme(fuzzScheme).WithObjects(objs...).
		WithStatusSubresource(&metal3.BareMetalHost{}, &metal3.HostFirmwareSettings{}).Build()
}

// TestNamesAField pins what the fuzz target accepts as naming a field.
func TestNamesAField(t *testing.T) {
	for msg, want := range map[string]bool{
		field.Invalid(field.NewPath("spec", "bmc", "address"), "x", "bad").Error(): true,
		"metadata.annotations[reboot.metal3.io]: invalid":                          true,
		"registration failed": false,
		"":                    false,
	} {
		if got := namesAField(msg); got != want {
			t.Errorf("namesAField(%q) = %v, want %v", msg, got, want)
		}
	}
}
