package v1beta1

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestImageArtifactWireNames: an artifact image written as the special-resource-operator wrote
// it (images[]{name, kind, namespace, pullsecret, path[]}) keeps its pull Secret and paths, and
// is written back under the same names.
func TestImageArtifactWireNames(t *testing.T) {
	const wire = `{"images":[{"name":"registry.example/firmware:1","kind":"DockerImage","namespace":"vendor",` +
		`"pullsecret":"vendor-pull","path":[{"sourcePath":"/firmware","destinationDir":"/lib/firmware"}]}]}`
	var a DriverContainerArtifacts
	if err := json.Unmarshal([]byte(wire), &a); err != nil {
		t.Fatal(err)
	}
	want := ImageArtifact{Name: "registry.example/firmware:1", Kind: "DockerImage", Namespace: "vendor", PullSecret: "vendor-pull",
		Paths: []HostPathArtifact{{SourcePath: "/firmware", DestinationDir: "/lib/firmware"}}}
	if len(a.Images) != 1 || !reflect.DeepEqual(a.Images[0], want) {
		t.Fatalf("decoded %+v, want %+v", a.Images, want)
	}
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var got, orig map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(wire), &orig); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, orig) {
		t.Errorf("encoded %s, want the names of %s", out, wire)
	}
}
