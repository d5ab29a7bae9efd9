package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// HardwareDataSpec holds the inspection result.
type HardwareDataSpec struct {
	// HardwareDetails is the hardware found by the last inspection.
	HardwareDetails *HardwareDetails `json:"hardware,omitempty"`
}

// HardwareData is the inspection result of the BareMetalHost of the same name, which owns it. It
// is recreated on each inspection.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hardwaredata,scope=Namespaced,shortName=hd
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time duration since creation of HardwareData"
type HardwareData struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HardwareDataSpec `json:"spec,omitempty"`
}

// HardwareDataList is a list of HardwareData.
// +kubebuilder:object:root=true
type HardwareDataList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HardwareData `json:"items"`
}

func init() {
	register(&HardwareData{}, &HardwareDataList{})
}
