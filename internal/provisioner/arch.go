package provisioner

import "runtime"

// ControllerArchitecture is the operator's own CPU in metal3's names (uname -m): the image
// architecture of a host whose spec and inspection do not say, and the one the plain deploy
// image variables are most likely built for.
var ControllerArchitecture = Architecture(runtime.GOARCH)

// Architecture maps a Go architecture to the name Ironic's inventories and metal3 use.
func Architecture(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	}
	return goarch // ppc64le, s390x, riscv64 are spelt the same
}
