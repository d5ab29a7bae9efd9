package apimetrics

import "testing"

func TestResource(t *testing.T) {
	for path, want := range map[string][2]string{
		"/api/v1/namespaces/ns/secrets/x":                                {"secrets", ""},
		"/api/v1/namespaces/ns/secrets":                                  {"secrets", ""},
		"/apis/metal3.io/v1alpha1/namespaces/ns/baremetalhosts/h/status": {"baremetalhosts", "status"},
		"/apis/events.k8s.io/v1/namespaces/ns/events":                    {"events", ""},
		"/api/v1/namespaces/ns":                                          {"namespaces", ""},
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/bmo": {"leases", ""},
		"/healthz": {"other", ""},
		"/apis/metal3.io/v1alpha1/baremetalhosts":                                {"baremetalhosts", ""},
		"/apis/metal3.io/v1alpha1/namespaces/ns/hardwaredata/h":                  {"hardwaredata", ""},
		"/apis/metal3.io/v1alpha1/namespaces/ns/baremetalhosts/h/finalizers/bad": {"baremetalhosts", "finalizers"},
	} {
		r, s := Resource(path)
		if r != want[0] || s != want[1] {
			t.Errorf("Resource(%q) = %q, %q; want %q, %q", path, r, s, want[0], want[1])
		}
	}
}

func TestVerb(t *testing.T) {
	cases := []struct {
		method            string
		watch, collection bool
		want              string
		write             bool
	}{
		{"GET", false, false, "get", false}, {"GET", false, true, "list", false}, {"GET", true, true, "watch", false},
		{"POST", false, true, "create", true}, {"PUT", false, false, "update", true},
		{"PATCH", false, false, "patch", true}, {"DELETE", false, false, "delete", true},
	}
	for _, c := range cases {
		if got := Verb(c.method, c.watch, c.collection); got != c.want || IsWrite(got) != c.write {
			t.Errorf("Verb(%s, %v, %v) = %q (write %v), want %q (write %v)", c.method, c.watch, c.collection, got, IsWrite(got), c.want, c.write)
		}
	}
}
