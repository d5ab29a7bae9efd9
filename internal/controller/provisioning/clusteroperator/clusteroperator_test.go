package clusteroperator

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/yaml"
)

var t0 = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

func statuses(co *configv1.ClusterOperator) map[configv1.ClusterStatusConditionType]string {
	out := map[configv1.ClusterStatusConditionType]string{}
	for _, c := range co.Status.Conditions {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

// TestApplyTable: every reason of the table writes the reference's statuses; the row's reason
// goes on the conditions it makes True, AsExpected on the others.
func TestApplyTable(t *testing.T) {
	for reason, want := range map[string]map[configv1.ClusterStatusConditionType]string{
		ReasonUnsupportedPlatform: {
			configv1.OperatorAvailable: "True/AsExpected", configv1.OperatorProgressing: "False/AsExpected",
			configv1.OperatorDegraded: "False/AsExpected", Disabled: "True/UnsupportedPlatform", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonWaitingForProvisioningCR: {
			configv1.OperatorAvailable: "True/WaitingForProvisioningCR", configv1.OperatorProgressing: "False/AsExpected",
			configv1.OperatorDegraded: "False/AsExpected", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonSyncing: {
			configv1.OperatorAvailable: "True/SyncingResources", configv1.OperatorProgressing: "True/SyncingResources",
			configv1.OperatorDegraded: "False/AsExpected", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonDeployComplete: {
			configv1.OperatorAvailable: "True/DeployComplete", configv1.OperatorProgressing: "False/AsExpected",
			configv1.OperatorDegraded: "False/AsExpected", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonInvalidConfiguration: {
			configv1.OperatorAvailable: "True/InvalidConfiguration", configv1.OperatorProgressing: "True/InvalidConfiguration",
			configv1.OperatorDegraded: "True/InvalidConfiguration", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonDeployTimedOut: {
			configv1.OperatorAvailable: "True/DeployTimedOut", configv1.OperatorProgressing: "True/DeployTimedOut",
			configv1.OperatorDegraded: "True/DeployTimedOut", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonDeploymentCrashLooping: {
			configv1.OperatorAvailable: "False/DeploymentCrashLooping", configv1.OperatorProgressing: "False/AsExpected",
			configv1.OperatorDegraded: "True/DeploymentCrashLooping", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonSyncError: {
			configv1.OperatorAvailable: "True/SyncError", configv1.OperatorProgressing: "True/SyncError",
			configv1.OperatorDegraded: "True/SyncError", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
		ReasonResourceNotFound: {
			configv1.OperatorAvailable: "False/ResourceNotFound", configv1.OperatorProgressing: "True/ResourceNotFound",
			configv1.OperatorDegraded: "False/AsExpected", Disabled: "False/AsExpected", configv1.OperatorUpgradeable: "True/AsExpected",
		},
	} {
		t.Run(reason, func(t *testing.T) {
			co := New()
			if !Apply(co, State{Reason: reason}, "4.22.0", RelatedObjects("openshift-machine-api"), t0) {
				t.Fatal("first Apply reported no change")
			}
			got := statuses(co)
			for typ, w := range want {
				if got[typ] != w {
					t.Errorf("%s = %s, want %s", typ, got[typ], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("conditions %v, want exactly %v", got, want)
			}
			if Apply(co, State{Reason: reason}, "4.22.0", RelatedObjects("openshift-machine-api"), t0.Add(time.Minute)) {
				t.Error("applying the same state again reported a change")
			}
		})
	}
	if len(Table) != 9 {
		t.Errorf("the table has %d rows; a new row needs a case here", len(Table))
	}
}

func TestApplyMessages(t *testing.T) {
	co := New()
	Apply(co, State{Reason: ReasonInvalidConfiguration, Message: "spec.provisioningIP: Required value"}, "", nil, t0)
	if c := Condition(co, configv1.OperatorDegraded); c.Message != "spec.provisioningIP: Required value" {
		t.Errorf("Degraded message %q", c.Message)
	}
	if c := Condition(co, configv1.OperatorProgressing); c.Message != "Unable to apply Provisioning CR: invalid configuration" {
		t.Errorf("Progressing message %q", c.Message)
	}
	Apply(co, State{Reason: ReasonUnsupportedPlatform}, "", nil, t0)
	if c := Condition(co, configv1.OperatorAvailable); c.Message != "Operational" {
		t.Errorf("Available message on an unsupported platform %q", c.Message)
	}
	if c := Condition(co, Disabled); c.Message != "Nothing to do on this Platform" {
		t.Errorf("Disabled message %q", c.Message)
	}
}

// TestTransitionTimes: a condition's time moves only when its status changes.
func TestTransitionTimes(t *testing.T) {
	co := New()
	Apply(co, State{Reason: ReasonSyncing}, "", nil, t0)
	t1 := t0.Add(time.Minute)
	Apply(co, State{Reason: ReasonSyncing, Progress: "Rolling out metal3"}, "", nil, t1)
	if got := Condition(co, configv1.OperatorProgressing).LastTransitionTime.Time; !got.Equal(t0) {
		t.Errorf("Progressing moved to %s on a message change", got)
	}
	Apply(co, State{Reason: ReasonDeployComplete}, "", nil, t1)
	if got := Condition(co, configv1.OperatorProgressing).LastTransitionTime.Time; !got.Equal(t1) {
		t.Errorf("Progressing at %s after it became False, want %s", got, t1)
	}
	if got := Condition(co, configv1.OperatorAvailable).LastTransitionTime.Time; !got.Equal(t0) {
		t.Errorf("Available moved to %s though it stayed True", got)
	}
}

// TestVersions: the version is written once the state is at level; until then an upgrade shows
// as Progressing, and Available stays True.
func TestVersions(t *testing.T) {
	co := New()
	Apply(co, State{Reason: ReasonSyncing}, "4.21.0", nil, t0)
	if len(co.Status.Versions) != 0 {
		t.Fatalf("versions %v before the first deployment completed", co.Status.Versions)
	}
	Apply(co, State{Reason: ReasonDeployComplete, AtLevel: true}, "4.21.0", nil, t0)
	if v := operatorVersion(co); v != "4.21.0" {
		t.Fatalf("operator version %q after the deployment completed", v)
	}
	// A new release: the deployment is complete but not yet at the new level.
	Apply(co, State{Reason: ReasonDeployComplete}, "4.22.0", nil, t0)
	p := Condition(co, configv1.OperatorProgressing)
	if p.Status != configv1.ConditionTrue || p.Reason != ReasonUpgrading || !strings.Contains(p.Message, "from 4.21.0 to 4.22.0") {
		t.Errorf("Progressing %+v while upgrading", *p)
	}
	if Condition(co, configv1.OperatorAvailable).Status != configv1.ConditionTrue || operatorVersion(co) != "4.21.0" {
		t.Error("Available dropped or the version moved before the level was reached")
	}
	Apply(co, State{Reason: ReasonDeployComplete, AtLevel: true}, "4.22.0", nil, t0)
	if operatorVersion(co) != "4.22.0" || Condition(co, configv1.OperatorProgressing).Status != configv1.ConditionFalse {
		t.Errorf("after the upgrade: version %q, Progressing %+v", operatorVersion(co), *Condition(co, configv1.OperatorProgressing))
	}
}

func TestUpgradeableWhileBusy(t *testing.T) {
	co := New()
	Apply(co, State{Reason: ReasonDeployComplete, Busy: "1 host is provisioning: ns/h0"}, "", nil, t0)
	u := Condition(co, configv1.OperatorUpgradeable)
	if u.Status != configv1.ConditionFalse || u.Reason != ReasonHostsBusy || u.Message != "1 host is provisioning: ns/h0" {
		t.Fatalf("Upgradeable %+v", *u)
	}
	Apply(co, State{Reason: ReasonDeployComplete}, "", nil, t0)
	if Condition(co, configv1.OperatorUpgradeable).Status != configv1.ConditionTrue {
		t.Error("Upgradeable stays False once no host is busy")
	}
}

func TestRelatedObjects(t *testing.T) {
	refs := RelatedObjects("openshift-machine-api")
	seen := map[string]bool{}
	for _, r := range refs {
		seen[r.Group+"/"+r.Resource] = true
		if r.Group == "metal3.io" && r.Resource != "provisionings" && r.Namespace != "openshift-machine-api" {
			t.Errorf("%s is not namespaced to the operator's namespace", r.Resource)
		}
	}
	for _, want := range []string{"/namespaces", "metal3.io/baremetalhosts", "metal3.io/provisionings", "metal3.io/hostupdatepolicies", "rbac.authorization.k8s.io/clusterroles"} {
		if !seen[want] {
			t.Errorf("related objects lack %s", want)
		}
	}
	var deployments []string
	for _, r := range refs {
		if r.Group == "apps" && r.Resource == "deployments" && r.Namespace == "openshift-machine-api" {
			deployments = append(deployments, r.Name)
		}
	}
	if want := []string{"metal3", "metal3-baremetal-operator", "metal3-image-customization"}; !slices.Equal(deployments, want) {
		t.Errorf("related Deployments %v, want %v", deployments, want)
	}
	for _, want := range rbacObjects(t) {
		if !slices.Contains(refs, want) {
			t.Errorf("related objects lack %s %s/%s, which the release payload ships", want.Resource, want.Namespace, want.Name)
		}
	}
	co := New()
	Apply(co, State{Reason: ReasonDeployComplete}, "", refs, t0)
	if Apply(co, State{Reason: ReasonDeployComplete}, "", RelatedObjects("openshift-machine-api"), t0) {
		t.Error("the same related objects again reported a change")
	}
}

// rbacObjects are the objects of the release payload's RBAC manifest, as related-object references.
func rbacObjects(t *testing.T) []configv1.ObjectReference {
	t.Helper()
	raw, err := os.ReadFile("../../../../manifests/0000_31_cluster-baremetal-operator_05_rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resources := map[string]string{"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
		"RoleBinding": "rolebindings", "ServiceAccount": "serviceaccounts"}
	var out []configv1.ObjectReference
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "" {
			continue
		}
		resource, ok := resources[obj.Kind]
		if !ok {
			t.Fatalf("the RBAC manifest has a %s, which this test does not know", obj.Kind)
		}
		group := ""
		if g, _, versioned := strings.Cut(obj.APIVersion, "/"); versioned {
			group = g
		}
		out = append(out, configv1.ObjectReference{Group: group, Resource: resource, Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name})
	}
	if len(out) < 5 {
		t.Fatalf("%d objects in the RBAC manifest, want at least the operator's 5", len(out))
	}
	return out
}
