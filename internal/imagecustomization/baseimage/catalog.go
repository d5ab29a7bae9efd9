package baseimage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Set is the base images for one architecture; any of them may be missing.
type Set struct {
	ISO    *ISO
	Initrd *File
	Kernel *File
}

// Catalog is the base images by architecture (x86_64, aarch64, …).
type Catalog struct {
	// HostArch is the architecture of the unsuffixed files (the controller's own).
	HostArch string
	ByArch   map[string]*Set
}

// Paths name the base images for the host architecture (DEPLOY_ISO, DEPLOY_INITRD,
// DEPLOY_KERNEL); empty ones are not served.
type Paths struct {
	ISO, Initrd, Kernel string
}

// HostArch is the controller's architecture in the kernel's spelling, as PreprovisioningImages
// and BareMetalHosts name it.
func HostArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}

// Load opens the images at p and their per-architecture siblings. A path that is given must
// exist; an initrd needs its kernel and the other way round.
func Load(p Paths) (*Catalog, error) {
	c := &Catalog{HostArch: HostArch(), ByArch: map[string]*Set{}}
	if p.ISO == "" && p.Initrd == "" {
		return nil, errors.New("no base image: set DEPLOY_ISO and/or DEPLOY_INITRD with DEPLOY_KERNEL")
	}
	if (p.Initrd == "") != (p.Kernel == "") {
		return nil, errors.New("DEPLOY_INITRD and DEPLOY_KERNEL go together")
	}
	kinds := []struct {
		path string
		env  string
		open func(*Set, string) error
	}{
		{p.ISO, "DEPLOY_ISO", func(s *Set, path string) (err error) { s.ISO, err = OpenISO(path); return err }},
		{p.Initrd, "DEPLOY_INITRD", func(s *Set, path string) (err error) { s.Initrd, err = openPlain(path); return err }},
		{p.Kernel, "DEPLOY_KERNEL", func(s *Set, path string) (err error) { s.Kernel, err = openPlain(path); return err }},
	}
	for _, k := range kinds {
		if k.path == "" {
			continue
		}
		found, err := variants(k.path, c.HostArch)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.env, err)
		}
		for arch, path := range found {
			s := c.ByArch[arch]
			if s == nil {
				s = &Set{}
				c.ByArch[arch] = s
			}
			if err := k.open(s, path); err != nil {
				return nil, fmt.Errorf("%s: %w", k.env, err)
			}
		}
	}
	for arch, s := range c.ByArch {
		if (s.Initrd == nil) != (s.Kernel == nil) {
			return nil, fmt.Errorf("architecture %s has an initramfs or a kernel without the other", arch)
		}
	}
	return c, nil
}

func openPlain(path string) (*File, error) {
	f, _, err := openFile(path)
	return f, err
}

// variants finds path (the host architecture) and its siblings <stem>_<arch><ext> and
// <stem>.<arch><ext>.
func variants(path, hostArch string) (map[string]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	out := map[string]string{hostArch: path}
	dir, name := filepath.Split(path)
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	entries, err := os.ReadDir(filepath.Clean(dir + "."))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == name || !strings.HasSuffix(n, ext) {
			continue
		}
		mid := strings.TrimSuffix(n, ext)
		for _, sep := range []string{"_", "."} {
			if arch, ok := strings.CutPrefix(mid, stem+sep); ok && archName(arch) {
				if _, dup := out[arch]; !dup {
					out[arch] = filepath.Join(dir, n)
				}
			}
		}
	}
	return out, nil
}

// archName tells an architecture from other suffixes ("agent.iso.bak", "agent_old_2.iso"): no
// dot or underscore, except in x86_64.
func archName(s string) bool {
	return s == "x86_64" || (s != "" && !strings.ContainsAny(s, "._"))
}

// For returns the images for arch ("" means the host's), or nil.
func (c *Catalog) For(arch string) *Set {
	if arch == "" {
		arch = c.HostArch
	}
	return c.ByArch[arch]
}

// Arches lists the architectures with an image, sorted.
func (c *Catalog) Arches() []string {
	var out []string
	for a := range c.ByArch {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
