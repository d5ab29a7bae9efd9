package hostfirmwaresettings

import (
	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

// CacheViews are how the controller needs the manager to cache what it reads. FirmwareSchemas are
// read only to learn whether one exists (its content comes from the provisioner with every read of
// a host's settings) and to delete unused ones, so their cached copies keep only the metadata and
// the hardware vendor and model: a real BIOS registry holds hundreds of settings.
func CacheViews() []cacheview.View {
	return []cacheview.View{{
		Object: &metal3.FirmwareSchema{}, Owner: "host firmware settings controller", Transform: compactSchema,
		Reduced: "spec.schema is left out (read the FirmwareSchema through the API reader)",
	}}
}

func compactSchema(obj any) (any, error) {
	if fs, ok := obj.(*metal3.FirmwareSchema); ok {
		fs.Spec.Schema = nil
	}
	return obj, nil
}
