package hostfirmwaresettings

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// countingReader counts the provisioner's firmware reads per host.
type countingReader struct {
	provisioner.FirmwareReader
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingReader) FirmwareSettings(ctx context.Context, h provisioner.Host, includeSchema bool) (metal3.SettingsMap, map[string]metal3.SettingSchema, error) {
	c.mu.Lock()
	c.reads[h.Name]++
	c.mu.Unlock()
	return c.FirmwareReader.FirmwareSettings(ctx, h, includeSchema)
}

func (c *countingReader) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[name]
}

// TestRestartSpreadsSettledReads: when the operator starts again, a host whose
// HostFirmwareSettings asks for nothing is not read from the provisioner at once (every host is
// reconciled at a start; reading them all at once loads a busy Ironic), but within the resync
// period, which shows what changed while the operator was down; a host with a pending change is
// read at once.
func TestRestartSpreadsSettledReads(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	before := startOperator(t, env.Config, ns, fix)
	settled, pending := newHost(t, fix, ns, "settled"), newHost(t, fix, ns, "pending")
	waitHFS(t, ns, "settled", "judged", current)
	waitHFS(t, ns, "pending", "judged", current) // created by the operator: setSpec needs it
	gen := setSpec(t, ns, "pending", metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")})
	waitHFS(t, ns, "pending", "the change detected", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Generation == gen && current(hfs) && condition(hfs, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
	})
	before.stop()

	// While the operator is down, the settled host's BIOS changes outside the operator.
	res, err := fix.Service(context.Background(), provisioner.Host{Namespace: ns, Name: "settled", NodeID: settled.Status.Provisioning.ID},
		provisioner.ServiceData{FirmwareSettings: metal3.DesiredSettingsMap{"PowerOnDelaySeconds": intstr.FromInt32(30)}})
	if err != nil || res.Busy || res.Failed() {
		t.Fatalf("changing the setting in the fixture: %+v %v", res, err)
	}

	reads := &countingReader{FirmwareReader: fix, reads: map[string]int{}}
	const resync = 3 * time.Second
	after := startOperator(t, env.Config, ns, reads, func(c *Config) { c.Resync = resync })
	after.WaitAfter(t, types.NamespacedName{Namespace: ns, Name: pending.Name}, 0, 1)
	if n := reads.count("pending"); n == 0 {
		t.Errorf("the host with a pending change was not read at the start")
	}
	after.WaitAfter(t, types.NamespacedName{Namespace: ns, Name: settled.Name}, 0, 1)
	if n := reads.count("settled"); n != 0 {
		t.Errorf("the settled host was read %d times at the start, want its read spread over the resync", n)
	}
	hfs := waitHFS(t, ns, "settled", "the change made while the operator was down", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["PowerOnDelaySeconds"] == "30"
	})
	if n := reads.count("settled"); n == 0 || !current(hfs) {
		t.Errorf("settled host after its deferred read: %d reads, conditions %+v", n, hfs.Status.Conditions)
	}
}
