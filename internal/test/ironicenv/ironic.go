// Package ironicenv starts the real parts that tests, benchmarks and the demo drive the operator
// against: an Ironic instance of their own (hack/ironic-up.sh) and bmcsim in process, plus a small
// client for bmcsim's control API. One copy, so that the provisioner tests, test/ironic, test/e2e,
// the Ironic benchmark and the demo start them the same way.
package ironicenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ExitMirrorUnreachable is hack/ironic-up.sh's exit code when Debian's mirror cannot be reached
// (the root cannot be built): tests skip on it.
const ExitMirrorUnreachable = 3

// ErrMirrorUnreachable wraps a start that failed because the Ironic root could not be downloaded.
var ErrMirrorUnreachable = errors.New("the Debian mirror is unreachable, Ironic cannot be installed")

// RackConf is the configuration (for Options.ExtraConf) of an Ironic that works on a whole rack at
// once. Ironic's defaults refuse more than 50 nodes cleaning and 250 deploying at once (503,
// "concurrent action limit"); a rack enrolled at once cleans every node together, so both limits
// go to 1000. The power poll after the agent powered the server off drops from 5 s to 1 s, as in
// the tests.
const RackConf = `
[conductor]
max_concurrent_clean = 1000
max_concurrent_deploy = 1000

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 60
`

// Options choose an Ironic instance and how it starts.
type Options struct {
	// Instance is IRONIC_INSTANCE: an independent Ironic with its own ports, database and logs.
	Instance string
	// ExtraConf is appended to ironic.conf (IRONIC_EXTRA_CONF), e.g. short timeouts for tests.
	ExtraConf string
	// WipeDB starts with an empty database (--wipe-db).
	WipeDB bool
	// Debug turns on Ironic's debug log (IRONIC_DEBUG=1).
	Debug bool
	// MemoizeKeyDerivation starts Ironic with its PBKDF2 key derivation memoized
	// (IRONIC_PBKDF2_MEMO=1, hack/ironic-common.sh write_pbkdf2_memo). Stock Ironic 39 derives a
	// 600000-round key from the BMC password at every Redfish session lookup, about two thirds of
	// its CPU; the function is pure, so the memo changes nothing Ironic does but that CPU. The
	// operator suites use it so that a slow day on two cores does not push Ironic's answers past
	// their deadlines; test/ironic keeps stock Ironic.
	MemoizeKeyDerivation bool
	// OwnerPID, when not 0, stops and deletes the instance once that process exits, so a killed
	// test binary leaves no Ironic behind (IRONIC_OWNER_PID).
	OwnerPID int
	// Env is more environment for the script (IRONIC_CACHE_DIR, ...).
	Env []string
}

// Instance is one Ironic started by hack/ironic-up.sh.
type Instance struct {
	Name string
	// Vars are the NAME=value lines the script printed: IRONIC_ENDPOINT, IRONIC_URL,
	// DEPLOY_KERNEL_URL, DEPLOY_RAMDISK_URL, DEPLOY_ISO_URL, IRONIC_LOG, IRONIC_STATE_DIR, ...
	Vars map[string]string
	// StartLog is the script's progress output of the last start.
	StartLog string
	// StartTime is how long the last start took.
	StartTime time.Duration

	opts Options
}

// RepoRoot is the repository holding this package (found from the source file, so it works from
// any working directory: test packages, go run, built programs run from the tree).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// CacheDir is where the Ironic root lives (IRONIC_CACHE_DIR or <repo>/.cache/ironic).
func CacheDir() string {
	if d := os.Getenv("IRONIC_CACHE_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".cache", "ironic")
}

// RootReady reports whether the Ironic root has been built (hack/ironic-up.sh --prepare-only).
func RootReady() bool {
	_, err := os.Stat(filepath.Join(CacheDir(), "root", ".metalforge-root-v1"))
	return err == nil
}

// Unavailable says why Ironic cannot run here ("" when it can): it needs root, and either a built
// root or Debian's mirror to build one.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return "needs root (Ironic runs in a debootstrapped chroot started by hack/ironic-up.sh)"
	}
	if !RootReady() && !debianReachable() {
		return "the Ironic root is not built and deb.debian.org is unreachable"
	}
	return ""
}

func debianReachable() bool {
	c, err := net.DialTimeout("tcp", "deb.debian.org:80", 5*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Start starts (or, with WipeDB, restarts with an empty database) an Ironic instance and returns
// when its API answers. A failure because Debian's mirror is unreachable wraps ErrMirrorUnreachable.
func Start(o Options) (*Instance, error) {
	if o.Instance == "" {
		return nil, errors.New("ironicenv: Options.Instance is required")
	}
	i := &Instance{Name: o.Instance, opts: o}
	if err := i.start(o.WipeDB); err != nil {
		return nil, err
	}
	return i, nil
}

// Restart stops the instance and starts it again on the same ports, with an empty database when
// wipe is set. Vars are refreshed.
func (i *Instance) Restart(wipe bool) error {
	return i.start(wipe)
}

// Resume starts a stopped instance again (a no-op when it runs), keeping its database.
func (i *Instance) Resume() error { return i.start(false) }

func (i *Instance) start(wipe bool) error {
	var env []string
	if i.opts.ExtraConf != "" {
		f, err := os.CreateTemp("", "ironic-extra-*.conf")
		if err != nil {
			return err
		}
		// The script appends the file to ironic.conf while it runs; it is not needed afterwards.
		defer os.Remove(f.Name())
		if _, err := f.WriteString(i.opts.ExtraConf); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		env = append(env, "IRONIC_EXTRA_CONF="+f.Name())
	}
	if i.opts.Debug {
		env = append(env, "IRONIC_DEBUG=1")
	}
	if i.opts.MemoizeKeyDerivation {
		env = append(env, "IRONIC_PBKDF2_MEMO=1")
	}
	if i.opts.OwnerPID != 0 {
		env = append(env, "IRONIC_OWNER_PID="+strconv.Itoa(i.opts.OwnerPID))
	}
	env = append(env, i.opts.Env...)
	var args []string
	if wipe {
		args = append(args, "--wipe-db")
	}
	start := time.Now()
	out, log, err := i.script("ironic-up.sh", env, args...)
	i.StartLog, i.StartTime = log, time.Since(start)
	if err != nil {
		return err
	}
	vars := ParseVars(out)
	for _, k := range []string{"IRONIC_ENDPOINT", "IRONIC_URL", "DEPLOY_ISO_URL", "DEPLOY_KERNEL_URL", "DEPLOY_RAMDISK_URL", "IRONIC_LOG", "IRONIC_STATE_DIR"} {
		if vars[k] == "" {
			return fmt.Errorf("hack/ironic-up.sh printed no %s:\n%s", k, out)
		}
	}
	i.Vars = vars
	return nil
}

// Stop stops the instance and keeps its state (database, logs).
func (i *Instance) Stop() error {
	_, _, err := i.script("ironic-down.sh", i.opts.Env)
	return err
}

// Kill kills Ironic's processes with SIGKILL, as a crash or an OOM kill would (no shutdown: nodes
// it was working on stay locked by a conductor that is gone), and returns once they are gone. Its
// image server and database server keep running; Resume or Restart start Ironic again.
func (i *Instance) Kill() error {
	pids := i.PIDs()
	if len(pids) == 0 {
		return fmt.Errorf("ironic instance %s: no running process to kill", i.Name)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		alive := false
		for _, pid := range pids {
			alive = alive || syscall.Kill(pid, 0) == nil && !zombie(pid)
		}
		if !alive {
			// The pid file goes too: a killed process that nobody reaps stays a zombie, which
			// `kill -0` still finds, and the script would wait 20 s for it to stop.
			_ = os.Remove(filepath.Join(i.Vars["IRONIC_STATE_DIR"], "ironic.pid"))
			return nil
		}
	}
	return fmt.Errorf("ironic instance %s: processes %v still alive 30 s after SIGKILL", i.Name, pids)
}

// zombie reports whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses, which may itself hold spaces.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// Purge stops the instance and deletes its state.
func (i *Instance) Purge() error {
	_, _, err := i.script("ironic-down.sh", i.opts.Env, "--purge")
	return err
}

// script runs hack/<name> for this instance; it returns stdout and stderr.
func (i *Instance) script(name string, env []string, args ...string) (string, string, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", name), args...)
	cmd.Env = append(append(os.Environ(), "IRONIC_INSTANCE="+i.Name), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == ExitMirrorUnreachable {
			return stdout.String(), stderr.String(), fmt.Errorf("hack/%s: %w\n%s", name, ErrMirrorUnreachable, LastLines(stderr.String(), 30))
		}
		return stdout.String(), stderr.String(), fmt.Errorf("hack/%s: %w\n%s", name, err, LastLines(stderr.String(), 30))
	}
	return stdout.String(), stderr.String(), nil
}

// Endpoint is Ironic's versioned API URL (http://127.0.0.1:PORT/v1/), as gophercloud and the
// operator's IRONIC_ENDPOINT take it.
func (i *Instance) Endpoint() string { return i.Vars["IRONIC_ENDPOINT"] }

// URL is Ironic's API without /v1 (the agents' fallback ipa-api-url).
func (i *Instance) URL() string { return i.Vars["IRONIC_URL"] }

// OperatorEnv is the environment the operator reads (metal3's names) to use this instance.
func (i *Instance) OperatorEnv() []string {
	var env []string
	for _, k := range []string{"IRONIC_ENDPOINT", "DEPLOY_KERNEL_URL", "DEPLOY_RAMDISK_URL", "DEPLOY_ISO_URL"} {
		env = append(env, k+"="+i.Vars[k])
	}
	return env
}

// LogProblems returns the last n WARNING and ERROR lines of Ironic's log.
func (i *Instance) LogProblems(n int) string {
	b, err := os.ReadFile(i.Vars["IRONIC_LOG"])
	if err != nil {
		return err.Error()
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, " ERROR ") || strings.Contains(l, " WARNING ") {
			lines = append(lines, l)
		}
	}
	return LastLines(strings.Join(lines, "\n"), n)
}

// PIDs lists Ironic's processes: the process group the script started (the single-process
// `ironic` master, its workers and the commands they run), for CPU and memory figures.
func (i *Instance) PIDs() []int { return i.group("ironic.pid") }

// DatabasePIDs lists the processes of the instance's MariaDB (IRONIC_USE_MARIADB=true); none
// with sqlite, which runs inside Ironic.
func (i *Instance) DatabasePIDs() []int { return i.group("mariadb.pid") }

// group lists the processes of the process group whose leader's pid is in the state file.
func (i *Instance) group(pidFile string) []int {
	b, err := os.ReadFile(filepath.Join(i.Vars["IRONIC_STATE_DIR"], pidFile))
	if err != nil {
		return nil
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	var pids []int
	entries, _ := filepath.Glob("/proc/[0-9]*")
	for _, e := range entries {
		pid, err := strconv.Atoi(filepath.Base(e))
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ParseVars reads NAME=value lines.
func ParseVars(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ExecSQL runs one SQL statement on the instance's SQLite database (with Python's sqlite3 inside
// the Ironic root, which has it) and returns the number of rows it changed. Tests use it to put
// nodes in states no API call reaches, as a lost conductor thread or a killed conductor leaves
// them. Ironic may be running: it reads nodes from the database on every request.
func (i *Instance) ExecSQL(sql string) (int, error) {
	root, state := i.Vars["IRONIC_ROOT"], i.Vars["IRONIC_STATE_DIR"]
	rel, err := filepath.Rel(root, filepath.Join(state, "ironic.sqlite"))
	if err != nil || strings.HasPrefix(rel, "..") {
		return 0, fmt.Errorf("the database %s/ironic.sqlite is not inside the root %s (IRONIC_USE_MARIADB?)", state, root)
	}
	const script = `import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=30)
n = c.execute(sys.argv[2]).rowcount
c.commit()
print(n)`
	out, err := exec.Command("chroot", root, "/usr/bin/python3", "-c", script, "/"+rel, sql).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("editing Ironic's database: %w\n%s", err, out)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}
