package ignition

import (
	"bytes"
	"compress/gzip"
	"fmt"

	"github.com/cavaliergopher/cpio"
)

// ConfigName is where CoreOS's initramfs looks for an embedded Ignition config.
const ConfigName = "config.ign"

// Archive packs config as a gzip-compressed newc cpio archive holding ConfigName: what CoreOS
// reads from an ISO's Ignition embed area (images/ignition.img) or from an initramfs appended to
// the live one. The bytes depend only on config (no time stamps, fixed inode).
func Archive(config []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("compressing the Ignition archive: %w", err)
	}
	cw := cpio.NewWriter(zw)
	hdr := &cpio.Header{Name: ConfigName, Mode: cpio.TypeReg | 0o644, Size: int64(len(config)), Inode: 1}
	if err := cw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("writing the Ignition archive: %w", err)
	}
	if _, err := cw.Write(config); err != nil {
		return nil, fmt.Errorf("writing the Ignition archive: %w", err)
	}
	if err := cw.Close(); err != nil {
		return nil, fmt.Errorf("writing the Ignition archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the Ignition archive: %w", err)
	}
	return buf.Bytes(), nil
}
