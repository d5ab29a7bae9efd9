package v1alpha1

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHasBMCDetails(t *testing.T) {
	for name, tc := range map[string]struct {
		bmc  BMCDetails
		want bool
	}{
		"none":             {BMCDetails{}, false},
		"address only":     {BMCDetails{Address: "ipmi://10.0.0.1"}, true},
		"credentials only": {BMCDetails{CredentialsName: "bmc"}, true},
		"both":             {BMCDetails{Address: "ipmi://10.0.0.1", CredentialsName: "bmc"}, true},
	} {
		t.Run(name, func(t *testing.T) {
			host := BareMetalHost{Spec: BareMetalHostSpec{BMC: tc.bmc}}
			if got := host.HasBMCDetails(); got != tc.want {
				t.Errorf("HasBMCDetails() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCredentialsKeyUsesTheHostNamespace(t *testing.T) {
	host := BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: "site-a", Name: "node-0"},
		Spec:       BareMetalHostSpec{BMC: BMCDetails{CredentialsName: "node-0-bmc"}},
	}
	if got, want := host.CredentialsKey(), (types.NamespacedName{Namespace: "site-a", Name: "node-0-bmc"}); got != want {
		t.Errorf("CredentialsKey() = %v, want %v", got, want)
	}
}

func TestBootModeDefaultsToUEFI(t *testing.T) {
	for spec, want := range map[BootMode]BootMode{"": UEFI, Legacy: Legacy, UEFISecureBoot: UEFISecureBoot} {
		host := BareMetalHost{Spec: BareMetalHostSpec{BootMode: spec}}
		if got := host.BootMode(); got != want {
			t.Errorf("spec %q: BootMode() = %q, want %q", spec, got, want)
		}
	}
}

func TestInspectionDisabled(t *testing.T) {
	for name, tc := range map[string]struct {
		mode        InspectionMode
		annotations map[string]string
		want        bool
	}{
		"default":                    {"", nil, false},
		"agent":                      {InspectionModeAgent, nil, false},
		"fast":                       {InspectionModeFast, nil, false},
		"disabled by field":          {InspectionModeDisabled, nil, true},
		"disabled by annotation":     {"", map[string]string{InspectAnnotationPrefix: "disabled"}, true},
		"re-inspection request only": {"", map[string]string{InspectAnnotationPrefix: ""}, false},
	} {
		t.Run(name, func(t *testing.T) {
			host := BareMetalHost{
				ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations},
				Spec:       BareMetalHostSpec{InspectionMode: tc.mode},
			}
			if got := host.InspectionDisabled(); got != tc.want {
				t.Errorf("InspectionDisabled() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWasProvisioned(t *testing.T) {
	for name, tc := range map[string]struct {
		spec   BareMetalHostSpec
		status ProvisionStatus
		want   bool
	}{
		"nothing":                     {BareMetalHostSpec{}, ProvisionStatus{}, false},
		"image":                       {BareMetalHostSpec{}, ProvisionStatus{Image: Image{URL: "http://x/os.img"}}, true},
		"custom deploy":               {BareMetalHostSpec{}, ProvisionStatus{CustomDeploy: &CustomDeploy{Method: "m"}}, true},
		"externally provisioned wins": {BareMetalHostSpec{ExternallyProvisioned: true}, ProvisionStatus{Image: Image{URL: "http://x/os.img"}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			host := BareMetalHost{Spec: tc.spec, Status: BareMetalHostStatus{Provisioning: tc.status}}
			if got := host.WasProvisioned(); got != tc.want {
				t.Errorf("WasProvisioned() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOperationMetricForState(t *testing.T) {
	host := &BareMetalHost{}
	h := &host.Status.OperationHistory
	for state, want := range map[ProvisioningState]*OperationMetric{
		StateRegistering:    &h.Register,
		StateInspecting:     &h.Inspect,
		StateProvisioning:   &h.Provision,
		StateDeprovisioning: &h.Deprovision,
		StateAvailable:      nil,
		StateProvisioned:    nil,
	} {
		if got := host.OperationMetricForState(state); got != want {
			t.Errorf("OperationMetricForState(%q) = %p, want %p", state, got, want)
		}
	}
}

func TestOperationMetricDuration(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(90 * time.Second))
	for name, tc := range map[string]struct {
		metric OperationMetric
		want   time.Duration
	}{
		"finished":    {OperationMetric{Start: start, End: end}, 90 * time.Second},
		"running":     {OperationMetric{Start: start}, 0},
		"not started": {OperationMetric{}, 0},
	} {
		if got := tc.metric.Duration(); got != tc.want {
			t.Errorf("%s: Duration() = %v, want %v", name, got, tc.want)
		}
	}
}

func TestCredentialsStatusMatch(t *testing.T) {
	secret := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bmc", ResourceVersion: "42"}}
	ref := &corev1.SecretReference{Namespace: "ns", Name: "bmc"}
	for name, tc := range map[string]struct {
		status CredentialsStatus
		want   bool
	}{
		"same version":    {CredentialsStatus{Reference: ref, Version: "42"}, true},
		"older version":   {CredentialsStatus{Reference: ref, Version: "41"}, false},
		"other secret":    {CredentialsStatus{Reference: &corev1.SecretReference{Namespace: "ns", Name: "x"}, Version: "42"}, false},
		"other namespace": {CredentialsStatus{Reference: &corev1.SecretReference{Namespace: "x", Name: "bmc"}, Version: "42"}, false},
		"never recorded":  {CredentialsStatus{}, false},
	} {
		if got := tc.status.Match(secret); got != tc.want {
			t.Errorf("%s: Match() = %v, want %v", name, got, tc.want)
		}
	}
}

func TestImageKinds(t *testing.T) {
	liveISO, qcow2 := DiskFormatLiveISO, "qcow2"
	for name, tc := range map[string]struct {
		image        *Image
		liveISO, oci bool
	}{
		"nil":       {nil, false, false},
		"qcow2":     {&Image{URL: "http://x/os.qcow2", DiskFormat: &qcow2}, false, false},
		"live ISO":  {&Image{URL: "http://x/live.iso", DiskFormat: &liveISO}, true, false},
		"OCI":       {&Image{URL: "OCI://quay.io/os/image:1"}, false, true},
		"no format": {&Image{URL: "http://x/os.img"}, false, false},
	} {
		if got := tc.image.IsLiveISO(); got != tc.liveISO {
			t.Errorf("%s: IsLiveISO() = %v", name, got)
		}
		if got := tc.image.IsOCI(); got != tc.oci {
			t.Errorf("%s: IsOCI() = %v", name, got)
		}
	}
}

func TestPendingFirmwareChanges(t *testing.T) {
	hfs := &HostFirmwareSettings{
		Spec: HostFirmwareSettingsSpec{Settings: DesiredSettingsMap{
			"Same": intstr.FromString("A"), "Differs": intstr.FromString("B"), "Number": intstr.FromInt32(30), "Missing": intstr.FromString("C"),
		}},
		Status: HostFirmwareSettingsStatus{Settings: SettingsMap{"Same": "A", "Differs": "A", "Number": "30"}},
	}
	got := hfs.PendingSettings(nil)
	differs, missing := got["Differs"], got["Missing"]
	if len(got) != 2 || differs.String() != "B" || missing.String() != "C" {
		t.Errorf("pending settings %v, want Differs and Missing", got)
	}
	hfs.Spec.Settings = DesiredSettingsMap{"Same": intstr.FromString("A")}
	if got := hfs.PendingSettings(nil); got != nil {
		t.Errorf("pending settings %v, want none", got)
	}
	// As Ironic reports them: a Boolean as Python prints it, an integer without padding.
	hfs.Status.Settings = SettingsMap{"Bool": "True", "Off": "False", "Int": "30", "Enum": "Enabled"}
	hfs.Spec.Settings = DesiredSettingsMap{"Bool": intstr.FromString("true"), "Off": intstr.FromString("FALSE"),
		"Int": intstr.FromString("030"), "Enum": intstr.FromString("Enabled")}
	if got := hfs.PendingSettings(nil); got != nil {
		t.Errorf("pending settings %v, want none (the same values written otherwise)", got)
	}
	hfs.Spec.Settings = DesiredSettingsMap{"Bool": intstr.FromString("false"), "Int": intstr.FromInt32(31), "Enum": intstr.FromString("enabled")}
	if got := hfs.PendingSettings(nil); len(got) != 3 {
		t.Errorf("pending settings %v, want all three (another boolean, another number, an enumeration value differing in case)", got)
	}
	// With the types known: String values are text ("0042" is not 42), an Integer's are numbers,
	// a Boolean's any case; an Enumeration's "TRUE" is not "True".
	types := map[string]SettingSchema{"AssetTag": {AttributeType: "String"}, "Int": {AttributeType: "Integer"},
		"Bool": {AttributeType: "Boolean"}, "Mode": {AttributeType: "Enumeration"}}
	hfs.Status.Settings = SettingsMap{"AssetTag": "0042", "Int": "30", "Bool": "True", "Mode": "True"}
	hfs.Spec.Settings = DesiredSettingsMap{"AssetTag": intstr.FromString("42"), "Int": intstr.FromString("+30"),
		"Bool": intstr.FromString("true"), "Mode": intstr.FromString("TRUE")}
	got = hfs.PendingSettings(types)
	tag, mode := got["AssetTag"], got["Mode"]
	if len(got) != 2 || tag.String() != "42" || mode.String() != "TRUE" {
		t.Errorf("pending settings %v, want AssetTag and Mode (a String and an Enumeration compare as text)", got)
	}
	if got := hfs.PendingSettings(nil); len(got) != 0 {
		t.Errorf("pending settings %v without types, want none (compared as any type could be)", got)
	}
	applied, next := FirmwareUpdate{Component: "bios", URL: "http://x/1"}, FirmwareUpdate{Component: "bios", URL: "http://x/2"}
	hfc := &HostFirmwareComponents{Spec: HostFirmwareComponentsSpec{Updates: []FirmwareUpdate{next}}, Status: HostFirmwareComponentsStatus{Updates: []FirmwareUpdate{applied}}}
	if got := hfc.PendingUpdates(); len(got) != 1 || got[0] != next {
		t.Errorf("pending updates %v, want the new URL", got)
	}
	hfc.Status.Updates = []FirmwareUpdate{next}
	if got := hfc.PendingUpdates(); got != nil {
		t.Errorf("pending updates %v, want none", got)
	}
	// A stepped upgrade (the same component twice) over a host that had the last step alone
	// recorded: both steps, in order (the first alone was a downgrade the run then recorded as
	// the whole spec applied).
	bmc1, bmc2, bios := FirmwareUpdate{Component: "bmc", URL: "http://x/6.10"}, FirmwareUpdate{Component: "bmc", URL: "http://x/7.00"}, FirmwareUpdate{Component: "bios", URL: "http://x/b"}
	hfc = &HostFirmwareComponents{Spec: HostFirmwareComponentsSpec{Updates: []FirmwareUpdate{bmc1, bios, bmc2}},
		Status: HostFirmwareComponentsStatus{Updates: []FirmwareUpdate{bmc2, bios}}}
	if got := hfc.PendingUpdates(); !slices.Equal(got, []FirmwareUpdate{bmc1, bmc2}) {
		t.Errorf("pending updates %v, want both bmc steps in order", got)
	}
	hfc.Status.Updates = []FirmwareUpdate{bmc1, bios, bmc2}
	if got := hfc.PendingUpdates(); got != nil {
		t.Errorf("pending updates %v after the whole sequence, want none", got)
	}
}
