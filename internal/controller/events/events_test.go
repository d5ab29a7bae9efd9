package events

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8sevents "k8s.io/client-go/tools/events"
)

// TestEmit: events go out in the order they were queued, and a note is never used as a format.
func TestEmit(t *testing.T) {
	var l List
	l.Normal("Registered", "Register", "done at 100%")
	l.Warning("RegistrationError", "Register", "bad %s verb")
	rec := &k8sevents.FakeRecorder{Events: make(chan string, 4)}
	l.Emit(rec, &corev1.ConfigMap{})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{"Normal Registered done at 100%", "Warning RegistrationError bad %s verb"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("emitted %q, want %q", got, want)
	}
}
