package secrets

import (
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"testing"
)

const (
	testAuth    = `{"auths":{"registry.example.com:5000":{"auth":"dXNlcjpzM2NyZXQtdG9rZW4="}}}`
	testAuthNew = `{"auths":{"registry.example.com:5000":{"auth":"dXNlcjpyb3RhdGVkLXRva2Vu"}}}`
)

// TestPullSecretData: the copy holds the cluster's auth file as base64 text under the same key
// (OpenShift's double encoding, so a copy its operator left is already current); the same source
// gives the same bytes (the planner then sees no change and writes nothing); a cluster secret
// without an auth file gives no copy.
func TestPullSecretData(t *testing.T) {
	cluster := map[string][]byte{KeyDockerConfigJSON: []byte(testAuth), "other": []byte("x")}
	before := maps.Clone(cluster)
	data := PullSecretData(cluster)
	if len(data) != 1 {
		t.Fatalf("copy has keys %v, want only %s", slices.Sorted(maps.Keys(data)), KeyDockerConfigJSON)
	}
	if got, want := string(data[KeyDockerConfigJSON]), base64.StdEncoding.EncodeToString([]byte(testAuth)); got != want {
		t.Errorf("copy %q, want the base64 text %q", got, want)
	}
	if decoded, err := base64.StdEncoding.DecodeString(string(data[KeyDockerConfigJSON])); err != nil || string(decoded) != testAuth {
		t.Errorf("the copy decodes to %q (%v), want the cluster's auth file", decoded, err)
	}
	if !maps.EqualFunc(cluster, before, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Error("the cluster's data was changed")
	}
	if again := PullSecretData(map[string][]byte{KeyDockerConfigJSON: []byte(testAuth)}); string(again[KeyDockerConfigJSON]) != string(data[KeyDockerConfigJSON]) {
		t.Error("the same pull secret gives another copy: every reconcile would rewrite it")
	}
	for name, cluster := range map[string]map[string][]byte{
		"no data":            nil,
		"no auth file":       {"config.json": []byte(testAuth)},
		"an empty auth file": {KeyDockerConfigJSON: []byte(" \n")},
	} {
		if got := PullSecretData(cluster); got != nil {
			t.Errorf("%s: copy %v, want none", name, slices.Sorted(maps.Keys(got)))
		}
	}
}

// TestPullSecretFingerprint: the digest follows the content (a rotated pull secret restarts the
// image-customization-controller) and shows none of it.
func TestPullSecretFingerprint(t *testing.T) {
	a := PullSecretFingerprint(PullSecretData(map[string][]byte{KeyDockerConfigJSON: []byte(testAuth)}))
	b := PullSecretFingerprint(PullSecretData(map[string][]byte{KeyDockerConfigJSON: []byte(testAuth)}))
	c := PullSecretFingerprint(PullSecretData(map[string][]byte{KeyDockerConfigJSON: []byte(testAuthNew)}))
	if a == "" || a != b {
		t.Errorf("fingerprints %q and %q of the same pull secret", a, b)
	}
	if a == c {
		t.Errorf("a rotated pull secret has the same fingerprint %q", a)
	}
	for _, secret := range []string{testAuth, "dXNlcjpzM2NyZXQtdG9rZW4=", base64.StdEncoding.EncodeToString([]byte(testAuth))} {
		if strings.Contains(a, secret) || strings.Contains(secret, a) {
			t.Errorf("fingerprint %q shows the secret", a)
		}
	}
}
