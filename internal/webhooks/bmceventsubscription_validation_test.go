package webhooks

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func validSubscription() *metal3.BMCEventSubscription {
	return &metal3.BMCEventSubscription{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0-events", Namespace: "metal3"},
		Spec: metal3.BMCEventSubscriptionSpec{
			HostName:       "worker-0",
			Destination:    "https://events.example.com/redfish",
			Context:        "worker-0",
			HTTPHeadersRef: &corev1.SecretReference{Name: "event-headers", Namespace: "metal3"},
		},
	}
}

func TestValidateBMCEventSubscription(t *testing.T) {
	tests := map[string]struct {
		mutate func(*metal3.BMCEventSubscription)
		want   []string
		detail string
	}{
		"valid":             {mutate: func(*metal3.BMCEventSubscription) {}},
		"without headers":   {mutate: func(s *metal3.BMCEventSubscription) { s.Spec.HTTPHeadersRef = nil }},
		"http with a slash": {mutate: func(s *metal3.BMCEventSubscription) { s.Spec.Destination = "http://10.0.0.9:8080/" }},
		"missing host name": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.HostName = "" },
			want:   []string{"spec.hostName: Required value"},
		},
		"missing destination": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.Destination = "" },
			want:   []string{"spec.destination: Required value"},
		},
		"destination not a URL": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.Destination = "events.example.com" },
			want:   []string{"spec.destination: Invalid value"}, detail: "http:// or https://",
		},
		"destination with another scheme": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.Destination = "ftp://events.example.com/x" },
			want:   []string{"spec.destination: Invalid value"}, detail: "http:// or https://",
		},
		"host-only destination": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.Destination = "https://events.example.com" },
			want:   []string{"spec.destination: Invalid value"}, detail: "trailing slash",
		},
		"headers in another namespace": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.HTTPHeadersRef.Namespace = "kube-system" },
			want:   []string{"spec.httpHeadersRef.namespace: Invalid value"}, detail: `namespace "metal3"`,
		},
		"headers without namespace": {mutate: func(s *metal3.BMCEventSubscription) { s.Spec.HTTPHeadersRef.Namespace = "" }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sub := validSubscription()
			tc.mutate(sub)
			checkErrors(t, ValidateBMCEventSubscription(sub), tc.want, tc.detail)
		})
	}
}

func TestValidateBMCEventSubscriptionUpdate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*metal3.BMCEventSubscription)
		want   []string
	}{
		// metal3 compares the spec with != and so refuses even this when httpHeadersRef is set
		// (two pointers are never equal); a finalizer could not be added.
		"metadata and status only": {mutate: func(s *metal3.BMCEventSubscription) {
			s.Finalizers = []string{metal3.BMCEventSubscriptionFinalizer}
			s.Status.SubscriptionID = "abc"
		}},
		"destination changed": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.Destination = "https://other.example.com/" },
			want:   []string{"spec: Forbidden"},
		},
		"headers removed": {
			mutate: func(s *metal3.BMCEventSubscription) { s.Spec.HTTPHeadersRef = nil },
			want:   []string{"spec: Forbidden"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			oldSub := validSubscription()
			newSub := oldSub.DeepCopy()
			tc.mutate(newSub)
			checkErrors(t, ValidateBMCEventSubscriptionUpdate(oldSub, newSub), tc.want, "")
		})
	}
}
