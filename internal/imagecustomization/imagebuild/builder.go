// Package imagebuild makes a host's agent image: it reads the host's network data (nmstate →
// NetworkManager keyfiles), builds the Ignition config (merged with an override when asked),
// packs it as a compressed cpio archive and records the image as a base file plus that archive
// (in the ISO's Ignition embed area, or appended to the initramfs). Nothing is copied; the
// image server streams the record. It also prepares what every host shares: the minimal ISO
// template, and the kernel and live root filesystem served beside the images.
package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
)

// Config is what the builder needs.
type Config struct {
	Catalog *baseimage.Catalog
	Agent   ignition.AgentConfig
	NMState nmstate.Generator
	Store   *imagestore.Store
	// PublishURL is where the image server is reached (images-publish-addr), e.g.
	// http://192.0.2.2:8084.
	PublishURL string
	// MinimalISO serves ISOs without the root filesystem, which the live system fetches from
	// RootfsURL (or from this server when RootfsURL is empty).
	MinimalISO bool
	// RootfsURL is the live root filesystem's URL (IRONIC_ROOTFS_URL) for minimal ISOs and
	// initrd images; empty means the image server's copy from the base ISO.
	RootfsURL string
	// HTTPClient fetches Ignition overrides (default: the system roots, 30 s timeout; see
	// OverrideClient).
	HTTPClient *http.Client
	// SyncChecksumLimit: an image whose checksum needs more than this many bytes read from disk
	// gets it in the background (default 64 MiB).
	SyncChecksumLimit int64
	// OnChecksum is called when a background checksum was stored in r.
	OnChecksum func(r *imagestore.Record)
	Log        logr.Logger
}

// Builder builds images. Safe for concurrent use.
type Builder struct {
	cfg       Config
	isos      map[string]*baseimage.ISO // per arch: the ISO served (minimal template or base)
	rootfsURL map[string]string         // per arch
	kernelURL map[string]string         // per arch
	statics   map[string]*imagestore.Record
	validIDs  map[string]string // base path → content ID
	configID  string

	sums checksummer
}

// New prepares the shared images (minimal templates, kernel and root filesystem URLs).
func New(cfg Config) (*Builder, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient, _ = OverrideClient(nil) // no bundle: no error
	}
	if cfg.SyncChecksumLimit == 0 {
		cfg.SyncChecksumLimit = 64 << 20
	}
	cfg.PublishURL = strings.TrimSuffix(cfg.PublishURL, "/")
	if cfg.PublishURL == "" {
		return nil, errors.New("no publish URL for the images")
	}
	b := &Builder{
		cfg: cfg, isos: map[string]*baseimage.ISO{}, rootfsURL: map[string]string{}, kernelURL: map[string]string{},
		statics: map[string]*imagestore.Record{}, validIDs: map[string]string{},
	}
	b.sums.init(b)
	if cfg.MinimalISO {
		if err := removeStaleStaging(cfg.Store.Dir()); err != nil {
			return nil, err
		}
	}
	for _, arch := range cfg.Catalog.Arches() {
		if err := b.prepare(arch, cfg.Catalog.For(arch)); err != nil {
			return nil, fmt.Errorf("architecture %s: %w", arch, err)
		}
	}
	id, err := b.configDigest()
	if err != nil {
		return nil, err
	}
	b.configID = id
	return b, nil
}

func (b *Builder) prepare(arch string, set *baseimage.Set) error {
	if set.ISO != nil {
		b.validIDs[set.ISO.Path] = set.ISO.ID()
		if set.ISO.Rootfs.Length > 0 {
			name := b.cfg.Store.Name([]byte("rootfs"), []byte(set.ISO.ID())) + ".img"
			b.statics[name] = &imagestore.Record{
				UID: "rootfs-" + arch, Image: name, Arch: arch, Base: set.ISO.Path, BaseID: set.ISO.ID(),
				BaseOffset: set.ISO.Rootfs.Offset, BaseSize: set.ISO.Rootfs.Length, Size: set.ISO.Rootfs.Length, ModTime: set.ISO.ModTime,
			}
			b.rootfsURL[arch] = b.cfg.PublishURL + "/" + name
		}
	}
	if b.cfg.RootfsURL != "" {
		u, err := archRootfsURL(b.cfg.RootfsURL, arch, b.cfg.Catalog.HostArch)
		if err != nil {
			return err
		}
		b.rootfsURL[arch] = u
	}
	if set.Kernel != nil {
		b.validIDs[set.Kernel.Path] = set.Kernel.ID()
		name := b.cfg.Store.Name([]byte("kernel"), []byte(set.Kernel.ID())) + ".kernel"
		b.statics[name] = &imagestore.Record{
			UID: "kernel-" + arch, Image: name, Arch: arch, Base: set.Kernel.Path, BaseID: set.Kernel.ID(),
			BaseSize: set.Kernel.Size, Size: set.Kernel.Size, ModTime: set.Kernel.ModTime,
		}
		b.kernelURL[arch] = b.cfg.PublishURL + "/" + name
	}
	if set.Initrd != nil {
		b.validIDs[set.Initrd.Path] = set.Initrd.ID()
		if b.rootfsURL[arch] == "" {
			// A CoreOS live initramfs finds its root filesystem only at coreos.live.rootfs_url:
			// without one every initrd image would fail to boot.
			return fmt.Errorf("initrd images need the live root filesystem: %s has no ISO beside it with one, and no IRONIC_ROOTFS_URL is set", set.Initrd.Path)
		}
	}
	if set.ISO == nil {
		return nil
	}
	if !b.cfg.MinimalISO {
		b.isos[arch] = set.ISO
		return nil
	}
	url := b.rootfsURL[arch]
	if url == "" {
		return fmt.Errorf("minimal ISO: %s has no root filesystem to serve and no IRONIC_ROOTFS_URL is set", set.ISO.Path)
	}
	tmpl, err := b.minimalTemplate(arch, set.ISO, url)
	if err != nil {
		return err
	}
	b.isos[arch] = tmpl
	b.validIDs[tmpl.Path] = tmpl.ID()
	return nil
}

// archRootfsURL is IRONIC_ROOTFS_URL for arch. The variable names the host architecture's root
// filesystem; another architecture's sits beside it with the architecture before the extension
// (ironic-python-agent_aarch64.rootfs), as OpenShift's machine OS images lay them out in Ironic's
// image directory and OpenShift's controller asks for them. The host's must never stand in: a
// live initramfs refuses a root filesystem that is not its own.
func archRootfsURL(hostURL, arch, hostArch string) (string, error) {
	if arch == hostArch {
		return hostURL, nil
	}
	u, err := url.Parse(hostURL)
	if err != nil {
		return "", fmt.Errorf("IRONIC_ROOTFS_URL is not a URL: %w", err)
	}
	ext := path.Ext(u.Path)
	u.Path = strings.TrimSuffix(u.Path, ext) + "_" + arch + ext
	u.RawPath = ""
	return u.String(), nil
}

// removeStaleStaging removes the staging directories (minimal-<random>) of minimal ISO templates
// whose writing a crash interrupted: each holds the base ISO's large files (100 MB and more), and
// the work directory outlives the process, so a crash loop would fill the disk. Only directories:
// the templates themselves are minimal-<arch>.iso files.
func removeStaleStaging(dir string) error {
	stale, err := filepath.Glob(filepath.Join(dir, "minimal-*"))
	if err != nil {
		return err
	}
	for _, p := range stale {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("removing a stale minimal ISO staging directory: %w", err)
			}
		}
	}
	return nil
}

// minimalTemplate writes (once per base and URL) the minimal ISO every host's ISO is made of.
func (b *Builder) minimalTemplate(arch string, base *baseimage.ISO, rootfsURL string) (*baseimage.ISO, error) {
	dir := b.cfg.Store.Dir()
	path := filepath.Join(dir, "minimal-"+arch+".iso")
	stampPath := path + ".json"
	stamp, _ := json.Marshal(map[string]string{"base": base.ID(), "rootfsURL": rootfsURL})
	if old, err := os.ReadFile(stampPath); err == nil && string(old) == string(stamp) {
		if tmpl, err := baseimage.OpenISO(path); err == nil {
			return tmpl, nil
		}
	}
	b.cfg.Log.Info("Writing the minimal ISO template", "arch", arch, "base", base.Path)
	if err := baseimage.WriteMinimal(base, rootfsURL, path, dir); err != nil {
		return nil, err
	}
	if err := os.WriteFile(stampPath, stamp, 0o600); err != nil {
		return nil, fmt.Errorf("minimal ISO: %w", err)
	}
	return baseimage.OpenISO(path)
}

// configDigest identifies everything shared by all images, so that a restart with a different
// configuration rebuilds them.
func (b *Builder) configDigest() (string, error) {
	data, err := json.Marshal(struct {
		Agent   ignition.AgentConfig
		Bases   map[string]string
		Rootfs  map[string]string
		Kernels map[string]string
		Minimal bool
	}{b.cfg.Agent, b.validIDs, b.rootfsURL, b.kernelURL, b.cfg.MinimalISO})
	if err != nil {
		return "", fmt.Errorf("digesting the configuration: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// Statics are the files served beside the images (kernels, root filesystems) by name.
func (b *Builder) Statics() map[string]*imagestore.Record { return b.statics }

// Valid reports whether a record's base is still the content it was built from.
func (b *Builder) Valid(r *imagestore.Record) bool { return b.validIDs[r.Base] == r.BaseID }

// Formats lists the formats the builder can make for arch ("" = the host's), ISO first; nil
// means the architecture is not supported.
func (b *Builder) Formats(arch string) []metal3.ImageFormat {
	if arch == "" {
		arch = b.cfg.Catalog.HostArch
	}
	var out []metal3.ImageFormat
	if b.isos[arch] != nil {
		out = append(out, metal3.ImageFormatISO)
	}
	if s := b.cfg.Catalog.For(arch); s != nil && s.Initrd != nil {
		out = append(out, metal3.ImageFormatInitRD)
	}
	return out
}

// HostArch is the architecture an empty spec.architecture means.
func (b *Builder) HostArch() string { return b.cfg.Catalog.HostArch }

// URL is where a record is served.
func (b *Builder) URL(r *imagestore.Record) string { return b.cfg.PublishURL + "/" + r.Image }

// Owns reports whether url is one of this server's images (so a Ready image whose record is gone
// was lost with the cache).
func (b *Builder) Owns(url string) bool { return strings.HasPrefix(url, b.cfg.PublishURL+"/") }

// Current is the image recorded for a PreprovisioningImage, or nil.
func (b *Builder) Current(uid string) *imagestore.Record {
	r := b.cfg.Store.Get(uid)
	if r == nil || !b.Valid(r) {
		return nil
	}
	return r
}

// Discard stops serving a PreprovisioningImage's image.
func (b *Builder) Discard(uid string) error { return b.cfg.Store.Delete(uid) }

// StoredImage names a stored image's PreprovisioningImage.
type StoredImage struct{ UID, Namespace, Name string }

// Stored lists the PreprovisioningImages that have an image stored (a snapshot).
func (b *Builder) Stored() []StoredImage {
	recs := b.cfg.Store.All()
	out := make([]StoredImage, len(recs))
	for i, r := range recs {
		out[i] = StoredImage{UID: r.UID, Namespace: r.Namespace, Name: r.Name}
	}
	return out
}

// DiscardNamed discards the images of the PreprovisioningImage namespace/name, whatever its UID
// (the object is gone, so none of them is its current one).
func (b *Builder) DiscardNamed(namespace, name string) error {
	return b.DiscardNamedExcept(namespace, name, "")
}

// DiscardNamedExcept discards the images of earlier PreprovisioningImages named namespace/name,
// all but the one of UID keep (the object of that name now): an object deleted and created again
// between two reconciles is never seen gone, and its predecessor's image, with the network
// configuration and pull secret of then, would be served until the next start.
func (b *Builder) DiscardNamedExcept(namespace, name, keep string) error {
	for _, r := range b.cfg.Store.All() {
		if r.Namespace == namespace && r.Name == name && r.UID != keep {
			if err := b.cfg.Store.Delete(r.UID); err != nil {
				return err
			}
		}
	}
	return nil
}

// Start computes the checksums left to do in the background until ctx ends (a manager
// Runnable).
func (b *Builder) Start(ctx context.Context) error {
	b.pendingChecksums(b.cfg.Store.All())
	return b.sums.run(ctx)
}
