package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AttachedImageReference is the image attached to the host.
type AttachedImageReference struct {
	URL string `json:"url"`
}

// DataImageError counts failed attach/detach attempts.
type DataImageError struct {
	Count   int    `json:"count"`
	Message string `json:"message"`
}

// DataImageSpec is the image to attach.
type DataImageSpec struct {
	// URL of the image to attach as virtual media.
	URL string `json:"url"`
}

// DataImageStatus is what is attached.
type DataImageStatus struct {
	// LastReconciled is when the image was last attached or detached.
	// +optional
	LastReconciled *metav1.Time `json:"lastReconciled,omitempty"`

	// AttachedImage is the image attached now.
	AttachedImage *AttachedImageReference `json:"attachedImage,omitempty"`

	// Error counts failures since the last success.
	Error *DataImageError `json:"error,omitempty"`
}

// DataImage is a virtual media image attached to the provisioned BareMetalHost of the same name
// when it is powered on.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type DataImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DataImageSpec   `json:"spec,omitempty"`
	Status DataImageStatus `json:"status,omitempty"`
}

// DataImageList is a list of DataImages.
// +kubebuilder:object:root=true
type DataImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DataImage `json:"items"`
}

func init() {
	register(&DataImage{}, &DataImageList{})
}
