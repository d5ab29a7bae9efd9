package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// busyOperation names what a host is doing that an Ironic restart would break: writing an image,
// cleaning it after use, or a live update (servicing). "" when none.
func busyOperation(h *metal3.BareMetalHost) string {
	switch {
	case h.Status.OperationalStatus == metal3.OperationalStatusServicing:
		return "servicing"
	case h.Status.Provisioning.State == metal3.StateProvisioning:
		return "provisioning"
	case h.Status.Provisioning.State == metal3.StateDeprovisioning:
		return "deprovisioning"
	}
	return ""
}

// maxBusyNamed is how many busy hosts the Upgradeable message names.
const maxBusyNamed = 5

// busyMessage is the Upgradeable=False message for the busy hosts ("" when none).
func busyMessage(hosts []metal3.BareMetalHost) string {
	var busy []string
	for i := range hosts {
		if op := busyOperation(&hosts[i]); op != "" {
			busy = append(busy, fmt.Sprintf("%s/%s (%s)", hosts[i].Namespace, hosts[i].Name, op))
		}
	}
	if len(busy) == 0 {
		return ""
	}
	slices.Sort(busy)
	what := "1 host is"
	if len(busy) > 1 {
		what = fmt.Sprintf("%d hosts are", len(busy))
	}
	named := busy
	more := ""
	if len(busy) > maxBusyNamed {
		named, more = busy[:maxBusyNamed], fmt.Sprintf(" and %d more", len(busy)-maxBusyNamed)
	}
	return fmt.Sprintf("%s provisioning, deprovisioning or servicing: %s%s. An upgrade restarts Ironic and would interrupt them; wait until they finish",
		what, strings.Join(named, ", "), more)
}

// busyHosts lists the hosts of the stack (every namespace with watchAllNamespaces) and describes
// the busy ones.
func (r *Reconciler) busyHosts(ctx context.Context, prov *metal3.Provisioning) (string, error) {
	var hosts metal3.BareMetalHostList
	var opts []client.ListOption
	if !prov.Spec.WatchAllNamespaces {
		opts = append(opts, client.InNamespace(r.Config.Namespace))
	}
	if err := r.Client.List(ctx, &hosts, opts...); err != nil {
		return "", fmt.Errorf("listing hosts: %w", err)
	}
	return busyMessage(hosts.Items), nil
}

// busyChanged passes host events that change whether the host is busy (or what it does), so that
// a host's every status write does not wake the operator.
func busyChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e ctrlevent.CreateEvent) bool { return busyOf(e.Object) != "" },
		DeleteFunc: func(e ctrlevent.DeleteEvent) bool { return busyOf(e.Object) != "" },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool { return busyOf(e.ObjectOld) != busyOf(e.ObjectNew) },
	}
}

func busyOf(o client.Object) string {
	if h, ok := o.(*metal3.BareMetalHost); ok {
		return busyOperation(h)
	}
	return ""
}
