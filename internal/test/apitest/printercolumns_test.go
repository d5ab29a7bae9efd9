package apitest

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestPreprovisioningImageColumns: `kubectl get ppimg` shows the Ready condition's status and
// reason, as metal3's does.
func TestPreprovisioningImageColumns(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	img := &metal3.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-0"}}
	if err := env.Client.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	img.Status.Conditions = []metav1.Condition{
		{Type: string(metal3.ConditionImageError), Status: metav1.ConditionFalse, Reason: metal3.ImageSuccessReason, LastTransitionTime: stamp(1)},
		{Type: string(metal3.ConditionImageReady), Status: metav1.ConditionTrue, Reason: metal3.ImageSuccessReason, LastTransitionTime: stamp(1)},
	}
	if err := env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	table := getTable(t, fmt.Sprintf("/apis/metal3.io/v1alpha1/namespaces/%s/preprovisioningimages", ns))
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	requireEqual(t, "columns", []string{"Name", "Ready", "Reason"}, names)
	if len(table.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(table.Rows))
	}
	requireEqual(t, "row", []any{"node-0", "True", "ImageSuccess"}, table.Rows[0].Cells)
}

// TestOtherKindsColumns checks the columns of the other kinds that define some.
func TestOtherKindsColumns(t *testing.T) {
	ns := env.Namespace(t)
	for resource, want := range map[string][]string{
		"hardwaredata":          {"Name", "Age"},
		"bmceventsubscriptions": {"Name", "Error", "Age"},
	} {
		table := getTable(t, fmt.Sprintf("/apis/metal3.io/v1alpha1/namespaces/%s/%s", ns, resource))
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		requireEqual(t, resource+" columns", want, names)
	}
}
