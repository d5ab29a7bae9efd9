package ironicrunner

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// Lifetimes of the static provisioning IP, as OpenShift's and metal3's static-ip-manager: the
// address lives only as long as a running pod keeps refreshing it, so a pod that moves to another
// node (or dies) does not leave it behind where it would clash with the new pod's.
const (
	// StaticIPSetLifetime bridges the init container and the refresh container's start; if the
	// address lapses meanwhile, the refresh container adds it again.
	StaticIPSetLifetime = 30
	// StaticIPLifetime and StaticIPRefresh: a refreshed address outlives its pod by 10 s at most.
	StaticIPLifetime = 10
	StaticIPRefresh  = 5 * time.Second
)

// IPCommand runs the `ip` tool with args (exec in the image, a recorder in tests).
type IPCommand func(ctx context.Context, args ...string) error

// StaticIPArgs is the `ip` command that puts the provisioning IP on iface, expiring after
// lifetime seconds unless it is refreshed (0: never, which nothing here asks for).
func StaticIPArgs(c Config, iface string, lifetime int) ([]string, error) {
	p, err := staticPrefix(c)
	if err != nil {
		return nil, err
	}
	args := []string{"addr", "replace", p.String(), "dev", iface}
	if lifetime > 0 {
		args = append(args, "valid_lft", strconv.Itoa(lifetime), "preferred_lft", strconv.Itoa(lifetime))
	}
	return args, nil
}

// StaticIPDeleteArgs is the `ip` command that takes the provisioning IP off iface.
func StaticIPDeleteArgs(c Config, iface string) ([]string, error) {
	p, err := staticPrefix(c)
	if err != nil {
		return nil, err
	}
	return []string{"addr", "del", p.String(), "dev", iface}, nil
}

func staticPrefix(c Config) (netip.Prefix, error) {
	if !c.ProvisioningIP.IsValid() || c.Prefix == 0 {
		return netip.Prefix{}, fmt.Errorf("PROVISIONING_IP=%q: want address/prefix for the static IP", c.ProvisioningIP)
	}
	return netip.PrefixFrom(c.ProvisioningIP, c.Prefix), nil
}

// SetStaticIP puts the provisioning IP on the provisioning interface for StaticIPSetLifetime
// (mode static-ip set, the init container) and returns the interface.
func SetStaticIP(ctx context.Context, c Config, links func() ([]Link, error), ip IPCommand) (string, error) {
	iface, err := staticIPInterface(c, links)
	if err != nil {
		return "", err
	}
	args, err := StaticIPArgs(c, iface, StaticIPSetLifetime)
	if err != nil {
		return "", err
	}
	return iface, ip(ctx, args...)
}

// KeepStaticIP renews the provisioning IP every `every` with StaticIPLifetime until ctx ends (the
// pod stops: SIGTERM), then deletes it, so that the next pod, wherever it runs, is the only one to
// hold it (mode static-ip refresh).
func KeepStaticIP(ctx context.Context, c Config, links func() ([]Link, error), ip IPCommand, every time.Duration, logf func(string, ...any)) error {
	for {
		iface, err := staticIPInterface(c, links)
		if err != nil {
			return err
		}
		args, err := StaticIPArgs(c, iface, StaticIPLifetime)
		if err != nil {
			return err
		}
		if err := ip(ctx, args...); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return removeStaticIP(ctx, c, iface, ip, logf)
		case <-time.After(every):
		}
	}
}

// removeStaticIP deletes the provisioning IP once ctx is over, with a few seconds of its own
// within the pod's grace period.
func removeStaticIP(ctx context.Context, c Config, iface string, ip IPCommand, logf func(string, ...any)) error {
	args, err := StaticIPDeleteArgs(c, iface)
	if err != nil {
		return err
	}
	del, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := ip(del, args...); err != nil {
		return fmt.Errorf("removing the provisioning IP: %w", err)
	}
	logf("removed %s from %s", args[2], iface)
	return nil
}

func staticIPInterface(c Config, links func() ([]Link, error)) (string, error) {
	l, err := links()
	if err != nil {
		return "", err
	}
	return ProvisioningInterface(c, l)
}
