package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BMCEventSubscriptionSpec is a Redfish event subscription to create on a host's BMC.
type BMCEventSubscriptionSpec struct {
	// HostName is the BareMetalHost in the same namespace.
	HostName string `json:"hostName,omitempty"`

	// Destination is the webhook URL the BMC sends events to.
	Destination string `json:"destination,omitempty"`

	// Context is free text the BMC sends back with each event.
	Context string `json:"context,omitempty"`

	// HTTPHeadersRef references a Secret with HTTP headers sent with each event.
	HTTPHeadersRef *corev1.SecretReference `json:"httpHeadersRef,omitempty"`
}

// BMCEventSubscriptionStatus is the subscription as created on the BMC.
type BMCEventSubscriptionStatus struct {
	// SubscriptionID is the BMC's identifier of the subscription.
	SubscriptionID string `json:"subscriptionID,omitempty"`
	// Error is the last error.
	Error string `json:"error,omitempty"`
}

// BMCEventSubscription subscribes a webhook to a host's BMC (Redfish) events.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bes;bmcevent
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Error",type="string",JSONPath=".status.error",description="The most recent error message"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time duration since creation of BMCEventSubscription"
type BMCEventSubscription struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BMCEventSubscriptionSpec   `json:"spec,omitempty"`
	Status BMCEventSubscriptionStatus `json:"status,omitempty"`
}

// BMCEventSubscriptionList is a list of BMCEventSubscriptions.
// +kubebuilder:object:root=true
type BMCEventSubscriptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BMCEventSubscription `json:"items"`
}

func init() {
	register(&BMCEventSubscription{}, &BMCEventSubscriptionList{})
}
