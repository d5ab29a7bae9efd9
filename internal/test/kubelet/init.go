package kubelet

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// initEnv names the spec file of a container the re-executed test binary must become.
const initEnv = "METALFORGE_KUBELET_INIT"

// mountKind is what initSpec mounts.
type mountKind string

const (
	mountBind  mountKind = "bind"
	mountProc  mountKind = "proc"
	mountSysfs mountKind = "sysfs"
	mountTmpfs mountKind = "tmpfs"
)

type mountSpec struct {
	Kind     mountKind `json:"kind"`
	Source   string    `json:"source,omitempty"`
	Target   string    `json:"target"`
	ReadOnly bool      `json:"readOnly,omitempty"`
	// File: the source is a file (the target is created as an empty file).
	File bool `json:"file,omitempty"`
}

// initSpec is everything the container init needs; written as JSON by the kubelet.
type initSpec struct {
	// Scratch is a directory on the host where the init mounts a tmpfs for the overlay's upper
	// and work directories and the merged root.
	Scratch string `json:"scratch"`
	// Layers are the image's directories, top first.
	Layers   []string    `json:"layers"`
	Mounts   []mountSpec `json:"mounts"`
	ReadOnly bool        `json:"readOnlyRoot,omitempty"`
	Workdir  string      `json:"workdir,omitempty"`
	Argv     []string    `json:"argv"`
	Env      []string    `json:"env"`
	UID      int         `json:"uid"`
	GID      int         `json:"gid"`
}

// MaybeInit turns the process into a container when the kubelet started it as one, and never
// returns then. Call it first thing in TestMain.
func MaybeInit() {
	path := os.Getenv(initEnv)
	if path == "" {
		return
	}
	if err := containerInit(path); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet container init: %v\n", err)
		os.Exit(127)
	}
	os.Exit(127) // not reached: containerInit execs
}

func containerInit(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s initSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	// The mount namespace is this process's own (Unshareflags, made private by the Go runtime).
	if err := syscall.Mount("tmpfs", s.Scratch, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mounting the scratch tmpfs: %w", err)
	}
	upper, work, root := filepath.Join(s.Scratch, "upper"), filepath.Join(s.Scratch, "work"), filepath.Join(s.Scratch, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(s.Layers, ":"), upper, work)
	if err := syscall.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mounting the image's layers: %w", err)
	}
	base := []mountSpec{
		{Kind: mountProc, Target: "/proc"},
		{Kind: mountSysfs, Target: "/sys", ReadOnly: true},
		{Kind: mountBind, Source: "/dev", Target: "/dev"},
		{Kind: mountTmpfs, Target: "/dev/shm"},
	}
	for _, m := range append(base, s.Mounts...) {
		if err := mount(root, m); err != nil {
			return fmt.Errorf("mounting %s: %w", m.Target, err)
		}
	}
	if s.ReadOnly {
		if err := syscall.Mount("", root, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making the root read-only: %w", err)
		}
	}
	if err := syscall.Chroot(root); err != nil {
		return err
	}
	workdir := s.Workdir
	if workdir == "" {
		workdir = "/"
	}
	if err := os.Chdir(workdir); err != nil {
		return fmt.Errorf("working directory %s: %w", workdir, err)
	}
	if err := os.Setenv("PATH", lookupEnv(s.Env, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")); err != nil {
		return err
	}
	bin, err := exec.LookPath(s.Argv[0])
	if err != nil {
		return fmt.Errorf("the command %s is not in the image: %w", s.Argv[0], err)
	}
	if s.GID != 0 || s.UID != 0 {
		if err := syscall.Setgroups([]int{s.GID}); err != nil {
			return err
		}
		if err := syscall.Setgid(s.GID); err != nil {
			return err
		}
		if err := syscall.Setuid(s.UID); err != nil {
			return err
		}
	}
	return syscall.Exec(bin, s.Argv, s.Env)
}

func mount(root string, m mountSpec) error {
	target := filepath.Join(root, filepath.Clean("/"+m.Target))
	if m.File {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	} else if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	var err error
	switch m.Kind {
	case mountProc:
		err = syscall.Mount("proc", target, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
	case mountSysfs:
		err = syscall.Mount("sysfs", target, "sysfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC|syscall.MS_RDONLY, "")
	case mountTmpfs:
		err = syscall.Mount("tmpfs", target, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777")
	case mountBind:
		err = syscall.Mount(m.Source, target, "", syscall.MS_BIND|syscall.MS_REC, "")
		if err == nil && m.ReadOnly {
			err = syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
		}
	}
	return err
}

func lookupEnv(env []string, name, def string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return def
}
