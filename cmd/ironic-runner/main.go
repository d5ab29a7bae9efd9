// Command ironic-runner is the entry point of each container of the metal3 pod (see package
// internal/ironicrunner): ironic, httpd, dnsmasq, static-ip set, static-ip refresh. Its
// configuration is the environment, in metal3 ironic-image style.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/metalforge/metalforge/internal/ironicrunner"
)

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetPrefix("ironic-runner: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: ironic-runner ironic|httpd|dnsmasq|static-ip set|static-ip refresh")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c, err := ironicrunner.FromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(ctx, os.Args[1:], c); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, args []string, c ironicrunner.Config) error {
	switch args[0] {
	case "ironic":
		return ironicrunner.RunIronic(ctx, c, log.Printf)
	case "httpd":
		ip, err := ironicrunner.WaitIronicIP(ctx, c, ironicrunner.Links, log.Printf)
		if err != nil {
			return err
		}
		listen := ip.String()
		if c.ListenAll {
			listen = ""
		}
		return ironicrunner.Serve(ctx, c, listen, log.Printf)
	case "dnsmasq":
		return dnsmasq(ctx, c)
	case "static-ip":
		if len(args) < 2 || (args[1] != "set" && args[1] != "refresh") {
			return fmt.Errorf("usage: static-ip set|refresh")
		}
		return staticIP(ctx, c, args[1] == "refresh")
	}
	return fmt.Errorf("unknown mode %q", args[0])
}

func dnsmasq(ctx context.Context, c ironicrunner.Config) error {
	ip, err := ironicrunner.WaitIronicIP(ctx, c, ironicrunner.Links, log.Printf)
	if err != nil {
		return err
	}
	links, err := ironicrunner.Links()
	if err != nil {
		return err
	}
	iface, err := ironicrunner.ProvisioningInterface(c, links)
	if err != nil {
		return err
	}
	conf, err := ironicrunner.DnsmasqConf(c, ip, iface)
	if err != nil {
		return err
	}
	path := filepath.Join(c.ConfDir, "dnsmasq.conf")
	if err := os.MkdirAll(c.ConfDir, 0o755); err != nil {
		return err
	}
	if err := ironicrunner.FillTFTPRoot(c, log.Printf); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil { //nolint:gosec // no secrets in it
		return err
	}
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		return fmt.Errorf("dnsmasq is not installed in this image: %w", err)
	}
	return syscall.Exec(bin, []string{"dnsmasq", "--keep-in-foreground", "--log-facility=-", "--conf-file=" + path}, os.Environ()) //nolint:gosec // the image's own dnsmasq
}

func staticIP(ctx context.Context, c ironicrunner.Config, refresh bool) error {
	if refresh {
		return ironicrunner.KeepStaticIP(ctx, c, ironicrunner.Links, runIP, ironicrunner.StaticIPRefresh, log.Printf)
	}
	iface, err := ironicrunner.SetStaticIP(ctx, c, ironicrunner.Links, runIP)
	if err != nil {
		return err
	}
	log.Printf("set %s/%d on %s for %d s (the refresh container keeps it)", c.ProvisioningIP, c.Prefix, iface, ironicrunner.StaticIPSetLifetime)
	return nil
}

// runIP runs the image's `ip`.
func runIP(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %v: %w\n%s", args, err, out)
	}
	return nil
}
