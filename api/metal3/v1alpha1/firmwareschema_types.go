package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SettingSchema describes one firmware setting. JSON keys are snake_case as Ironic reports them
// (and as metal3 stores them).
type SettingSchema struct {
	// AttributeType is the setting's type.
	// +kubebuilder:validation:Enum=Enumeration;String;Integer;Boolean;Password
	AttributeType string `json:"attribute_type,omitempty"` //nolint:tagliatelle // wire compatibility

	// AllowableValues are the values of an Enumeration setting.
	AllowableValues []string `json:"allowable_values,omitempty"` //nolint:tagliatelle // wire compatibility

	// LowerBound is the smallest value of an Integer setting.
	LowerBound *int `json:"lower_bound,omitempty"` //nolint:tagliatelle // wire compatibility

	// UpperBound is the largest value of an Integer setting.
	UpperBound *int `json:"upper_bound,omitempty"` //nolint:tagliatelle // wire compatibility

	// MinLength is the shortest value of a String setting.
	MinLength *int `json:"min_length,omitempty"` //nolint:tagliatelle // wire compatibility

	// MaxLength is the longest value of a String setting.
	MaxLength *int `json:"max_length,omitempty"` //nolint:tagliatelle // wire compatibility

	// ReadOnly settings cannot be changed.
	ReadOnly *bool `json:"read_only,omitempty"` //nolint:tagliatelle // wire compatibility

	// ResetRequired says the host must reboot for a change to apply.
	ResetRequired *bool `json:"reset_required,omitempty"` //nolint:tagliatelle // wire compatibility

	// Unique settings differ per host (e.g. serial numbers).
	Unique *bool `json:"unique,omitempty"`
}

// FirmwareSchemaSpec is the schema of a hardware model's firmware settings.
type FirmwareSchemaSpec struct {
	// HardwareVendor the schema applies to.
	// +optional
	HardwareVendor string `json:"hardwareVendor,omitempty"`

	// HardwareModel the schema applies to.
	// +optional
	HardwareModel string `json:"hardwareModel,omitempty"`

	// Schema describes each setting, by name.
	Schema map[string]SettingSchema `json:"schema"`
}

// FirmwareSchema describes the firmware settings of a hardware model. Hosts with identical
// schemas share one (named "schema-<hash>").
// +kubebuilder:object:root=true
type FirmwareSchema struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FirmwareSchemaSpec `json:"spec,omitempty"`
}

// FirmwareSchemaList is a list of FirmwareSchemas.
// +kubebuilder:object:root=true
type FirmwareSchemaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FirmwareSchema `json:"items"`
}

func init() {
	register(&FirmwareSchema{}, &FirmwareSchemaList{})
}
