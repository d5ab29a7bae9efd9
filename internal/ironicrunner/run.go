package ironicrunner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// RunIronic prepares and starts Ironic (mode ironic): it waits for the provisioning address,
// writes the htpasswd and ironic.conf, creates the database schema on first start, and execs
// `ironic` (found on PATH), which replaces the runner.
func RunIronic(ctx context.Context, c Config, logf func(string, ...any)) error {
	ip, err := WaitIronicIP(ctx, c, Links, logf)
	if err != nil {
		return err
	}
	for _, d := range []string{c.ConfDir, filepath.Join(c.DataDir, "tmp"), filepath.Join(c.DataDir, "lock"), c.httpRoot(),
		filepath.Join(c.SharedDir, "tftpboot"), filepath.Join(c.SharedDir, "log", "ironic", "deploy")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	// Ironic creates httpboot directories with a check then a mkdir, and loses that race when a
	// rack boots at once (seen at 500 hosts with hack/ironic-up.sh): make them first.
	for _, d := range []string{"redfish", "master_images", "tmp"} {
		if err := os.MkdirAll(filepath.Join(c.httpRoot(), d), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if c.Htpasswd == "" {
		h, err := readMountedHtpasswd(MountedHtpasswd)
		if err != nil {
			return err
		}
		c.Htpasswd = h
	}
	if c.Htpasswd != "" {
		if err := os.WriteFile(c.htpasswdPath(), []byte(c.Htpasswd+"\n"), 0o600); err != nil {
			return fmt.Errorf("writing the htpasswd: %w", err)
		}
	} else {
		logf("WARNING: no htpasswd (IRONIC_HTPASSWD, HTTP_BASIC_HTPASSWD or %s): Ironic's API takes requests without authentication", MountedHtpasswd)
	}
	if w := ESPWarning(c); w != "" {
		logf("%s", w)
	}
	c.NoIPv6 = !IPv6Available()
	tls := c.TLS()
	if err := os.WriteFile(c.confPath(), []byte(IronicConf(c, ip, tls)), 0o600); err != nil {
		return fmt.Errorf("writing ironic.conf: %w", err)
	}
	logf("Ironic on %s (api %s, tls %v, basic auth %v, images %s)", ip, c.apiURL(ip, tls), tls, c.Htpasswd != "", c.httpRoot())
	if err := createSchema(ctx, c, logf); err != nil {
		return err
	}
	bin, err := exec.LookPath("ironic")
	if err != nil {
		return fmt.Errorf("ironic is not installed in this image: %w", err)
	}
	return syscall.Exec(bin, []string{"ironic", "--config-file", c.confPath()}, os.Environ()) //nolint:gosec // the image's own Ironic
}

// createSchema creates the sqlite database on first start, in write-ahead mode (readers then never
// wait for the conductor's writes).
func createSchema(ctx context.Context, c Config, logf func(string, ...any)) error {
	if _, err := os.Stat(c.databasePath()); err == nil {
		return nil
	}
	logf("creating the database schema in %s", c.databasePath())
	out, err := exec.CommandContext(ctx, "ironic-dbsync", "--config-file", c.confPath(), "create_schema").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ironic-dbsync create_schema: %w\n%s", err, out)
	}
	script := fmt.Sprintf("import sqlite3; sqlite3.connect(%q).execute('PRAGMA journal_mode=WAL')", c.databasePath())
	if out, err := exec.CommandContext(ctx, "python3", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("switching the database to write-ahead logging: %w\n%s", err, out)
	}
	return nil
}

// readMountedHtpasswd reads the htpasswd file metal3's image looks for when no variable holds it:
// "" when there is none; an unreadable one stops the runner (starting without authentication
// instead would open the API).
func readMountedHtpasswd(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the htpasswd %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
