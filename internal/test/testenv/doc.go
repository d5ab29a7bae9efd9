// Package testenv runs one real kube-apiserver and etcd (controller-runtime envtest) per test
// package, with every CRD of config/crd/bases installed, and gives each test its own namespace.
//
// Use it from TestMain:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }
//
//	func TestSomething(t *testing.T) {
//		ns := env.Namespace(t)
//		... env.Client.Create(ctx, obj) ...
//	}
//
// The binaries come from KUBEBUILDER_ASSETS, or else from bin/ at the repository root, where
// `make tools` builds them from source. Nothing is downloaded.
package testenv
