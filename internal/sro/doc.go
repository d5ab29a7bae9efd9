// Package sro holds the special-resource-operator's building blocks that its controllers share
// (internal/controller/specialresource, nodekernel, preflightvalidation, sroclusteroperator):
// naming (bounded object names and label values), kernel (kernel versions and the runtime
// variables derived from them), recipe (built-in and ConfigMap recipes, two-pass templating,
// kernel affinity), image (the driver image per kernel and the registry lookup), build (driver
// image builds: Kubernetes Jobs or OpenShift Builds), validation (the checks the webhook and the
// controller share) and webhook (admission).
package sro
