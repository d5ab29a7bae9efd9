package kubelet

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_NAMESPACE": "openshift-machine-api", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"--namespace=$(POD_NAMESPACE)":     "--namespace=openshift-machine-api",
		"$(UNKNOWN)/x":                     "$(UNKNOWN)/x",
		"$$(POD_NAMESPACE)":                "$(POD_NAMESPACE)",
		"a$(EMPTY)b":                       "ab",
		"cost $5":                          "cost $5",
		"$(POD_NAMESPACE":                  "$(POD_NAMESPACE",
		"$":                                "$",
		"$(POD_NAMESPACE)$(POD_NAMESPACE)": "openshift-machine-apiopenshift-machine-api",
		"htpasswd $2y$05$abc":              "htpasswd $2y$05$abc",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
