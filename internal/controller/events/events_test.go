package events

import (
	"fmt"
	"strings"
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

// TestEmitCleansNotes: a note leaves without the credentials of a URL it quotes, on one line and
// within the API server's 1024-byte limit (a longer note is refused and the Event lost).
func TestEmitCleansNotes(t *testing.T) {
	var l List
	l.Warning("ProvisioningError", "Provision", "Validation of image href https://admin:s3cret@mirror/os.img failed:\n"+strings.Repeat("detail ", 300))
	rec := &k8sevents.FakeRecorder{Events: make(chan string, 1)}
	l.Emit(rec, &corev1.ConfigMap{})
	got := strings.TrimPrefix(<-rec.Events, "Warning ProvisioningError ")
	if strings.Contains(got, "s3cret") || strings.Contains(got, "admin") {
		t.Errorf("the note kept the URL's credentials: %.120q", got)
	}
	if strings.Contains(got, "\n") || len(got) > 1024 || !strings.HasSuffix(got, "…") {
		t.Errorf("the note is %d bytes, multi-line %v, want one line of at most 1024 bytes ending in …", len(got), strings.Contains(got, "\n"))
	}
}
