package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// A host as metal3 users write it (metal3-dev-env / CAPM3 style), byte for byte: nothing here is
// adapted to Metalforge.
const metal3Host = `
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata:
  name: node-0
  labels:
    cluster.x-k8s.io/cluster-name: test1
  annotations:
    inspect.metal3.io: disabled
spec:
  online: true
  bootMACAddress: 00:b2:8c:ee:22:98
  bootMode: legacy
  automatedCleaningMode: disabled
  externallyProvisioned: false
  bmc:
    address: ipmi://192.168.111.1:6230
    credentialsName: node-0-bmc-secret
  rootDeviceHints:
    deviceName: /dev/sda
    rotational: false
  image:
    url: http://172.22.0.1/images/CENTOS_9_NODE_IMAGE_K8S_v1.30.0-raw.img
    checksum: http://172.22.0.1/images/CENTOS_9_NODE_IMAGE_K8S_v1.30.0-raw.img.sha256sum
    checksumType: sha256
    format: raw
  userData:
    name: test1-workers-7xn5t
    namespace: metal3
  networkData:
    name: test1-workers-7xn5t-networkdata
    namespace: metal3
  metaData:
    name: test1-workers-7xn5t-metadata
    namespace: metal3
  consumerRef:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
    kind: Metal3Machine
    name: test1-workers-7xn5t
    namespace: metal3
`

// The status BMO writes for a provisioned host (trimmed of hardware details).
const metal3Status = `
status:
  operationalStatus: OK
  errorMessage: ""
  errorCount: 0
  poweredOn: true
  lastUpdated: "2026-11-22T10:00:00Z"
  hardwareProfile: unknown
  goodCredentials:
    credentials:
      name: node-0-bmc-secret
      namespace: metal3
    credentialsVersion: "1879"
  triedCredentials:
    credentials:
      name: node-0-bmc-secret
      namespace: metal3
    credentialsVersion: "1879"
  operationHistory:
    register:
      start: "2026-11-22T09:40:00Z"
      end: "2026-11-22T09:41:00Z"
    inspect:
      start: null
      end: null
    provision:
      start: "2026-11-22T09:50:00Z"
      end: "2026-11-22T09:58:00Z"
    deprovision:
      start: null
      end: null
  provisioning:
    ID: 8a2f6b2e-8f1d-4d8a-9c55-3bb0f1f2a001
    state: provisioned
    bootMode: legacy
    rootDeviceHints:
      deviceName: /dev/sda
      rotational: false
    image:
      url: http://172.22.0.1/images/CENTOS_9_NODE_IMAGE_K8S_v1.30.0-raw.img
      checksum: http://172.22.0.1/images/CENTOS_9_NODE_IMAGE_K8S_v1.30.0-raw.img.sha256sum
      checksumType: sha256
      format: raw
  conditions:
  - type: Provisioned
    status: "True"
    reason: Provisioned
    message: ""
    lastTransitionTime: "2026-11-22T09:58:00Z"
    observedGeneration: 1
`

// TestMetal3HostAppliesUnchanged creates the metal3 manifest and its status as BMO writes it,
// rejecting unknown fields, and reads both back unchanged (as JSON, the way any client sees them).
func TestMetal3HostAppliesUnchanged(t *testing.T) {
	ns := env.Namespace(t)
	host := createMetal3Host(t, ns, metal3Host, metal3Status)

	sent := decodeObjects(t, "metal3Host", []byte(metal3Host))[0]
	requireEqual(t, "spec", sent.Object["spec"], host.Object["spec"])
	requireEqual(t, "annotations", sent.GetAnnotations(), host.GetAnnotations())
	requireEqual(t, "labels", sent.GetLabels(), host.GetLabels())

	status := decodeObjects(t, "metal3Status", []byte("kind: x\n"+metal3Status))[0].Object["status"].(map[string]any)
	// The only addition is the schema default of a field BMO releases before July 2026 did not
	// have.
	status["provisioningFailCount"] = int64(0)
	requireEqual(t, "status", status, host.Object["status"])

	// The typed client decodes it too.
	var typed metal3.BareMetalHost
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "node-0"}, &typed); err != nil {
		t.Fatal(err)
	}
	if typed.Status.Provisioning.ID != "8a2f6b2e-8f1d-4d8a-9c55-3bb0f1f2a001" || typed.Spec.BootMode != metal3.Legacy ||
		!typed.InspectionDisabled() || typed.Status.OperationHistory.Provision.Duration().Minutes() != 8 {
		t.Errorf("typed decode lost data: %+v", typed)
	}
}

// TestMetal3PrinterColumns reads BareMetalHosts as a server-side Table, which is what
// `kubectl get bmh` prints (and `-o wide` adds the priority 1 columns).
func TestMetal3PrinterColumns(t *testing.T) {
	ns := env.Namespace(t)
	createMetal3Host(t, ns, metal3Host, metal3Status)
	failing := `
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata:
  name: node-1
spec:
  online: false
  bmc:
    address: redfish+https://10.0.0.9/redfish/v1/Systems/1
    credentialsName: node-1-bmc-secret
`
	createMetal3Host(t, ns, failing, `
status:
  operationalStatus: error
  errorType: registration error
  errorMessage: "Failed to get power state for node: BMC did not answer"
  errorCount: 2
  poweredOn: false
  provisioning:
    ID: ""
    state: registering
`)

	table := getTable(t, fmt.Sprintf("/apis/metal3.io/v1alpha1/namespaces/%s/baremetalhosts", ns))
	type column struct {
		Name     string
		Type     string
		Priority int32
	}
	var gotCols []column
	for _, c := range table.ColumnDefinitions {
		gotCols = append(gotCols, column{c.Name, c.Type, c.Priority})
	}
	wantCols := []column{
		{"Name", "string", 0}, {"Status", "string", 1}, {"State", "string", 0}, {"Consumer", "string", 0},
		{"BMC", "string", 1}, {"Online", "string", 0}, {"Error", "string", 0}, {"Age", "date", 0},
	}
	requireEqual(t, "table columns", wantCols, gotCols)

	rows := map[string][]any{}
	for _, r := range table.Rows {
		rows[r.Cells[0].(string)] = r.Cells[:7] // Age varies
	}
	requireEqual(t, "table rows", map[string][]any{
		"node-0": {"node-0", "OK", "provisioned", "test1-workers-7xn5t", "ipmi://192.168.111.1:6230", "true", nil},
		"node-1": {"node-1", "error", "registering", nil, "redfish+https://10.0.0.9/redfish/v1/Systems/1", "false", "registration error"},
	}, rows)
}

// createMetal3Host creates a host from YAML, then writes the status YAML through the status
// subresource, both with strict field validation, and returns the stored object.
func createMetal3Host(t *testing.T, ns, hostYAML, statusYAML string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	host := decodeObjects(t, "host", []byte(hostYAML))[0]
	host.SetNamespace(ns)
	if err := env.Client.Create(ctx, host, strict); err != nil {
		t.Fatalf("creating the metal3 host: %v", err)
	}
	status := decodeObjects(t, "status", []byte("kind: x\n"+statusYAML))[0]
	host.Object["status"] = status.Object["status"]
	if err := env.Client.Status().Update(ctx, host, strict); err != nil {
		t.Fatalf("writing the metal3 status: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(host.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(host), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func getTable(t *testing.T, path string) *metav1.Table {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET %s as Table: %v: %s", path, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("decoding the Table: %v", err)
	}
	if table.Kind != "Table" {
		t.Fatalf("GET %s returned a %s, not a Table", path, table.Kind)
	}
	return &table
}
