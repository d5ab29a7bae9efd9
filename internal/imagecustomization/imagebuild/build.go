package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/imagecustomization/nmstate"
)

// NMStateKey is the network data Secret's key the controller reads (as OpenShift's does).
const NMStateKey = "nmstate"

// Request is what one PreprovisioningImage asks for.
type Request struct {
	UID, Namespace, Name string
	Format               metal3.ImageFormat
	// Arch is the architecture ("" = the host's).
	Arch string
	// NetworkDataName is the Secret's name ("" = none); NetworkData its data.
	NetworkDataName string
	NetworkData     map[string][]byte
	// OverrideURI is the Ignition override to merge ("" = none).
	OverrideURI string
}

// InvalidError is a build that cannot succeed with these inputs (ImageBuildInvalid): bad
// network data, a bad override, a config too large for the embed area.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// ErrUnsupported: the architecture or format cannot be built here (ConfigurationError).
var ErrUnsupported = errors.New("not supported")

// inputs digests a request with the configuration: an unchanged digest means an unchanged image.
func (b *Builder) inputs(req Request) string {
	nd := sha256.New()
	if req.NetworkDataName != "" {
		data, _ := json.Marshal(req.NetworkData) // map keys are sorted
		nd.Write(data)
	}
	data, _ := json.Marshal([]string{b.configID, string(req.Format), b.arch(req.Arch), req.NetworkDataName, hex.EncodeToString(nd.Sum(nil)), req.OverrideURI, req.Namespace, req.Name})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func (b *Builder) arch(a string) string {
	if a == "" {
		return b.cfg.Catalog.HostArch
	}
	return a
}

// Prepare returns the image for req: the recorded one when nothing it was built from changed
// (built is false), else a new record that is not stored yet (Commit stores it). A *InvalidError
// means the inputs are wrong; an *OverrideError that the override could not be fetched (retry);
// ErrUnsupported wraps a format or architecture this server has no base for.
func (b *Builder) Prepare(ctx context.Context, req Request) (rec *imagestore.Record, built bool, err error) {
	arch := b.arch(req.Arch)
	supported := false
	for _, f := range b.Formats(arch) {
		supported = supported || f == req.Format
	}
	if !supported {
		return nil, false, fmt.Errorf("%w: format %s for architecture %s", ErrUnsupported, req.Format, arch)
	}
	inputs := b.inputs(req)
	if cur := b.Current(req.UID); cur != nil && cur.Inputs == inputs {
		return cur, false, nil
	}
	config, err := b.config(ctx, req)
	if err != nil {
		return nil, false, err
	}
	archive, err := ignition.Archive(config)
	if err != nil {
		return nil, false, err
	}
	if req.Format == metal3.ImageFormatISO {
		rec, err = b.isoRecord(arch, archive)
	} else {
		rec = b.initrdRecord(arch, archive)
	}
	if err != nil {
		return nil, false, err
	}
	rec.UID, rec.Namespace, rec.Name, rec.Format, rec.Arch, rec.Inputs = req.UID, req.Namespace, req.Name, string(req.Format), arch, inputs
	archiveSum := sha256.Sum256(archive)
	ext := ".iso"
	if req.Format == metal3.ImageFormatInitRD {
		ext = ".initramfs"
	}
	rec.Image = b.cfg.Store.Name([]byte(rec.Format), []byte(arch), []byte(rec.BaseID), archiveSum[:], []byte(rec.KernelURL), []byte(rec.ExtraKernelParams), []byte(req.UID)) + ext
	if cur := b.cfg.Store.Get(req.UID); cur != nil && cur.Image == rec.Image {
		rec.SHA256 = cur.SHA256 // the same image: its checksum holds
	}
	return rec, true, nil
}

// Commit stores a record from Prepare (it is served from now on, replacing the
// PreprovisioningImage's previous image) and computes its checksum: at once when that is cheap,
// else in the background.
func (b *Builder) Commit(rec *imagestore.Record) error {
	if rec.SHA256 == "" {
		if sum, ok, err := b.sums.quick(rec); err != nil {
			return err
		} else if ok {
			rec.SHA256 = sum
		}
	}
	if err := b.cfg.Store.Put(rec); err != nil {
		return err
	}
	if rec.SHA256 == "" {
		b.sums.enqueue(rec.UID, rec.Image)
	}
	return nil
}

// config builds the host's Ignition config.
func (b *Builder) config(ctx context.Context, req Request) ([]byte, error) {
	host := ignition.Host{Hostname: req.Name}
	if req.NetworkDataName != "" {
		doc, ok := req.NetworkData[NMStateKey]
		if !ok {
			return nil, invalid("network data Secret %s has no %q key (nmstate YAML)", req.NetworkDataName, NMStateKey)
		}
		state, err := nmstate.Parse(doc)
		if err != nil {
			return nil, invalid("network data Secret %s: %v", req.NetworkDataName, err)
		}
		kfs, err := b.cfg.NMState.Keyfiles(ctx, state)
		var fe *nmstate.FieldError
		if errors.As(err, &fe) {
			return nil, invalid("network data Secret %s: %v", req.NetworkDataName, err)
		} else if err != nil {
			return nil, fmt.Errorf("writing NetworkManager keyfiles: %w", err)
		}
		host.Keyfiles = kfs
	}
	config, err := ignition.Build(b.cfg.Agent, host)
	if err != nil {
		return nil, fmt.Errorf("building the Ignition config: %w", err)
	}
	if req.OverrideURI == "" {
		return config, nil
	}
	override, err := b.fetchOverride(ctx, req.OverrideURI)
	if err != nil {
		return nil, err
	}
	merged, err := ignition.Merge(config, override)
	if errors.Is(err, ignition.ErrInvalidOverride) {
		return nil, invalid("Ignition override from %s: %v", redact(req.OverrideURI), err)
	}
	return merged, err
}

func (b *Builder) isoRecord(arch string, archive []byte) (*imagestore.Record, error) {
	base := b.isos[arch]
	if int64(len(archive)) > base.Area.Length {
		return nil, invalid("the Ignition config is %d bytes compressed, more than the %d bytes of the ISO's Ignition embed area", len(archive), base.Area.Length)
	}
	return &imagestore.Record{
		Base: base.Path, BaseID: base.ID(), BaseSize: base.Size, Size: base.Size, ModTime: base.ModTime,
		PatchOffset: base.Area.Offset, PatchLength: base.Area.Length, Patch: archive,
	}, nil
}

// initrdRecord appends the archive to the live initramfs at a 4-byte boundary (the kernel
// unpacks concatenated archives aligned so).
func (b *Builder) initrdRecord(arch string, archive []byte) *imagestore.Record {
	base := b.cfg.Catalog.For(arch).Initrd
	off := (base.Size + 3) &^ 3
	params := []string{"ignition.firstboot", "ignition.platform.id=metal"}
	if u := b.rootfsURL[arch]; u != "" {
		params = append([]string{"coreos.live.rootfs_url=" + u}, params...)
	}
	return &imagestore.Record{
		Base: base.Path, BaseID: base.ID(), BaseSize: base.Size, Size: off + int64(len(archive)), ModTime: base.ModTime,
		PatchOffset: off, PatchLength: int64(len(archive)), Patch: archive,
		KernelURL: b.kernelURL[arch], ExtraKernelParams: strings.Join(params, " "),
	}
}
