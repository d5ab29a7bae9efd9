package managerconfig

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newMemoizedRESTMapper is the manager's MapperProvider: controller-runtime's dynamic mapper
// behind a memo of the mappings it found.
//
// Why: a cache restricted to namespaces (--namespace) asks the mapper whether the kind is
// namespaced on every Get and List. The dynamic mapper answers by trying each API group the
// cluster serves in turn, building a "no match" error for each group that is not the kind's; at
// 5000 hosts that was a fifth of everything the baremetal-operator allocated (595 MB of 3 GB in a
// `bench-hosts` run). A kind's mapping does not change while its API is served, so a mapping found
// once is kept. What is not found is not kept: a CRD installed later is still found, as the
// dynamic mapper finds it (the special-resource-operator asks for optional kinds).
func newMemoizedRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return memoize(m), nil
}

func memoize(m meta.RESTMapper) *memoizedRESTMapper {
	return &memoizedRESTMapper{RESTMapper: m, found: map[mappingKey]meta.RESTMapping{}}
}

// memoizedRESTMapper answers RESTMapping from its memo; every other method is the delegate's.
type memoizedRESTMapper struct {
	meta.RESTMapper
	mu    sync.RWMutex
	found map[mappingKey]meta.RESTMapping
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

func (m *memoizedRESTMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{gk: gk}
	if len(versions) == 1 { // the cache's question; no join, no allocation
		key.versions = versions[0]
	} else if len(versions) > 1 {
		key.versions = strings.Join(versions, ",")
	}
	m.mu.RLock()
	mapping, ok := m.found[key]
	m.mu.RUnlock()
	if ok {
		return &mapping, nil // a copy: callers may change what they get
	}
	found, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.found[key] = *found
	m.mu.Unlock()
	return found, nil
}
