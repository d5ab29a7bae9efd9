package ironic

import (
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestCleaningSettleWait(t *testing.T) {
	now := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
	changed := func(ago time.Duration) func(*nodes.Node) {
		return func(n *nodes.Node) { n.ProvisionUpdatedAt = now.Add(-ago) }
	}
	prepared := func(n *nodes.Node) { n.Extra = map[string]any{extraPrepared: "fp"} }
	cases := map[string]struct {
		n    *nodes.Node
		want time.Duration
	}{
		"manual cleaning just ended":      {node(nodes.Manageable, prepared, changed(time.Second)), cleanSettle - time.Second},
		"manual cleaning ended long ago":  {node(nodes.Manageable, prepared, changed(time.Minute)), 0},
		"exactly the settle time":         {node(nodes.Manageable, prepared, changed(cleanSettle)), 0},
		"just inspected, never cleaned":   {node(nodes.Manageable, changed(time.Second)), 0},
		"not manageable":                  {node(nodes.Available, prepared, changed(time.Second)), 0},
		"no timestamp":                    {node(nodes.Manageable, prepared), 0},
		"Ironic's clock ahead of ours":    {node(nodes.Manageable, prepared, changed(-time.Hour)), cleanSettle},
		"empty fingerprint (was cleared)": {node(nodes.Manageable, func(n *nodes.Node) { n.Extra = map[string]any{extraPrepared: ""} }, changed(time.Second)), 0},
	}
	for name, tc := range cases {
		if got := cleaningSettleWait(tc.n, now); got != tc.want {
			t.Errorf("%s: wait %v, want %v", name, got, tc.want)
		}
	}
}
