package agent

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"

	"github.com/cavaliergopher/cpio"

	"github.com/metalforge/metalforge/internal/iso"
)

// What the simulated agent reads from a CoreOS live image, the way the live system does at boot:
// the Ignition config an image customization controller put into the ISO's embed area (or
// appended to the initramfs), the agent's configuration file in it, and the NetworkManager
// keyfiles, whose addresses the agent then reports as the server's. This reader is bmcsim's own
// (internal/iso, gzip, a newc cpio reader, JSON), written from the formats, so that it checks the
// controller's images independently of the controller's code.

const (
	ignInfoPath     = "coreos/igninfo.json"
	defaultEmbed    = "images/ignition.img"
	liveKernelPath  = "images/pxeboot/vmlinuz"
	liveRootfsPath  = "images/pxeboot/rootfs.img"
	ignitionName    = "config.ign"
	agentConfigPath = "/etc/ironic-python-agent.conf"
	keyfileDir      = "/etc/NetworkManager/system-connections/"
	rootfsURLParam  = "coreos.live.rootfs_url"
)

// isLive reports whether an ISO has CoreOS's live layout.
func isLive(im *iso.Image) bool {
	_, err := im.Stat(liveKernelPath)
	return err == nil
}

// liveEmbedArea returns the Ignition embed area's bytes (nil when the ISO has none).
func liveEmbedArea(im *iso.Image) ([]byte, error) {
	info := struct {
		File   string `json:"file"`
		Offset *int64 `json:"offset"`
		Length *int64 `json:"length"`
	}{File: defaultEmbed}
	if data, err := im.ReadFile(ignInfoPath); err == nil {
		if err := json.Unmarshal(data, &info); err != nil {
			return nil, fmt.Errorf("/%s: %w", ignInfoPath, err)
		}
	}
	data, err := im.ReadFile(info.File)
	if err != nil {
		return nil, nil //nolint:nilerr // an ISO without an embed area simply has no Ignition
	}
	off := int64(0)
	if info.Offset != nil {
		off = *info.Offset
	}
	end := int64(len(data))
	if info.Length != nil {
		end = off + *info.Length
	}
	if off < 0 || off > end || end > int64(len(data)) {
		return nil, fmt.Errorf("/%s: area outside %s", ignInfoPath, info.File)
	}
	return data[off:end], nil
}

// archiveFiles reads the concatenated cpio archives of an initramfs or an embed area (each plain
// or gzip-compressed, zero padding between and after), returning regular files by path. Reading
// stops at bytes that are no archive (an xz archive, which coreos-installer writes, is not read).
func archiveFiles(data []byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	rest := data
	for {
		rest = bytes.TrimLeft(rest, "\x00")
		if len(rest) == 0 {
			return files, nil
		}
		br := bytes.NewReader(rest)
		var r io.Reader = br
		switch {
		case bytes.HasPrefix(rest, []byte{0x1f, 0x8b}):
			zr, err := gzip.NewReader(br)
			if err != nil {
				return files, fmt.Errorf("initramfs archive: %w", err)
			}
			// bytes.Reader is an io.ByteReader: gzip reads exactly one member from it.
			zr.Multistream(false)
			r = zr
		case bytes.HasPrefix(rest, []byte("070701")):
		default:
			return files, nil
		}
		cr := cpio.NewReader(r)
		for {
			h, err := cr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return files, fmt.Errorf("initramfs archive: %w", err)
			}
			if !h.Mode.IsRegular() {
				continue
			}
			b, err := io.ReadAll(cr)
			if err != nil {
				return files, fmt.Errorf("initramfs archive: %w", err)
			}
			files[strings.TrimPrefix(path.Clean("/"+h.Name), "/")] = b
		}
		if zr, ok := r.(*gzip.Reader); ok {
			// Finish the member (its trailer) so the reader stands at the next one.
			if _, err := io.Copy(io.Discard, zr); err != nil {
				return files, fmt.Errorf("initramfs archive: %w", err)
			}
		}
		rest = rest[len(rest)-br.Len():]
	}
}

// liveConfig is what the agent takes from an Ignition config.
type liveConfig struct {
	// APIURL is the first api_url of /etc/ironic-python-agent.conf ("" when the file is absent).
	APIURL string
	// InspectionCallbackURL is the file's inspection_callback_url ("" when it has none).
	InspectionCallbackURL string
	// Insecure is the file's insecure option: the agent does not verify Ironic's certificate, as
	// with ipa-insecure=1 on the kernel command line.
	Insecure bool
	// Keyfiles are NetworkManager profiles by file name.
	Keyfiles map[string]string
}

// parseIgnition reads an Ignition config's files (inline data URLs; the simulated live system
// fetches nothing else).
func parseIgnition(config []byte) (liveConfig, error) {
	var c struct {
		Ignition struct{ Version string } `json:"ignition"`
		Storage  struct {
			Files []struct {
				Path     string `json:"path"`
				Contents struct {
					Source      *string `json:"source"`
					Compression *string `json:"compression"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return liveConfig{}, fmt.Errorf("reading the Ignition config: %w", err)
	}
	if !strings.HasPrefix(c.Ignition.Version, "3.") {
		return liveConfig{}, fmt.Errorf("the Ignition config has spec %q, not 3.x", c.Ignition.Version)
	}
	out := liveConfig{Keyfiles: map[string]string{}}
	for _, f := range c.Storage.Files {
		if f.Contents.Source == nil || (f.Contents.Compression != nil && *f.Contents.Compression != "") {
			continue
		}
		data, err := decodeDataURL(*f.Contents.Source)
		if err != nil {
			continue // not inline: the simulated system does not fetch
		}
		switch {
		case f.Path == agentConfigPath:
			out.APIURL = iniValue(string(data), "api_url")
			out.APIURL, _, _ = strings.Cut(out.APIURL, ",")
			out.InspectionCallbackURL = iniValue(string(data), "inspection_callback_url")
			// oslo.config's booleans.
			switch strings.ToLower(iniValue(string(data), "insecure")) {
			case "true", "1", "yes", "on":
				out.Insecure = true
			}
		case strings.HasPrefix(f.Path, keyfileDir):
			out.Keyfiles[strings.TrimPrefix(f.Path, keyfileDir)] = string(data)
		}
	}
	return out, nil
}

// decodeDataURL decodes an RFC 2397 data URL.
func decodeDataURL(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return nil, errors.New("not a data URL")
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errors.New("data URL without data")
	}
	if strings.HasSuffix(meta, ";base64") {
		return base64.StdEncoding.DecodeString(data)
	}
	u, err := url.PathUnescape(data)
	return []byte(u), err
}

// iniValue returns key's value in an INI file (any section), trimmed.
func iniValue(ini, key string) string {
	for _, line := range strings.Split(ini, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
