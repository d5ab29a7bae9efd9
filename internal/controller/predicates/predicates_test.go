package predicates

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
)

func TestDeletionMarked(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	later := metav1.NewTime(time.Unix(2000, 0))
	obj := func(ts *metav1.Time, finalizers ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ts, Finalizers: finalizers, Labels: map[string]string{}}}
	}
	withLabel := obj(nil)
	withLabel.Labels["x"] = "y"
	cases := []struct {
		name     string
		old, new *corev1.ConfigMap
		want     bool
	}{
		{"marked for deletion", obj(nil, "f"), obj(&now, "f"), true},
		{"unmarked (restored)", obj(&now, "f"), obj(nil, "f"), true},
		{"label change", obj(nil), withLabel, false},
		{"finalizer removed while deleting", obj(&now, "f"), obj(&now), false},
		{"timestamp moved", obj(&now, "f"), obj(&later, "f"), true},
	}
	p := DeletionMarked()
	for _, c := range cases {
		if got := p.Update(ctrlevent.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if !p.Create(ctrlevent.CreateEvent{Object: obj(nil)}) || !p.Delete(ctrlevent.DeleteEvent{Object: obj(nil)}) {
		t.Error("creations and deletions must pass")
	}
}

func TestSecretDataChanged(t *testing.T) {
	secret := func(data map[string][]byte, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Data: data}
	}
	v1 := map[string][]byte{"password": []byte("a")}
	v2 := map[string][]byte{"password": []byte("b")}
	cases := []struct {
		name     string
		old, new *corev1.Secret
		want     bool
	}{
		{"value changed", secret(v1, nil), secret(v2, nil), true},
		{"key added", secret(v1, nil), secret(map[string][]byte{"password": []byte("a"), "user": []byte("u")}, nil), true},
		{"labelled by an operator", secret(v1, nil), secret(v1, map[string]string{"environment.metal3.io": "baremetal"}), false},
	}
	p := SecretDataChanged()
	for _, c := range cases {
		if got := p.Update(ctrlevent.UpdateEvent{ObjectOld: c.old, ObjectNew: c.new}); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
