package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	"github.com/metalforge/metalforge/internal/iso"
)

// ErrBadImage marks an inserted image the BMC could not fetch or did not accept.
var ErrBadImage = errors.New("image not accepted")

// maxBootImage caps what a boot reads into memory for the agent.
const maxBootImage = 512 << 20

// InsertMedia attaches an image to a virtual media device. Like a real BMC it fetches the image
// URL; the Cd device only accepts an ISO 9660 image. inserted and writeProtected default to true.
// pre is checked after the fetch, when the media changes.
func (s *Server) InsertMedia(ctx context.Context, device, image string, inserted, writeProtected *bool, pre Precondition) error {
	if !slices.Contains(MediaDevices, device) {
		return fmt.Errorf("%w: virtual media %s", ErrNotFound, device)
	}
	u, err := url.Parse(image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("Image %q is not an http or https URL", image)
	}
	if err := s.fleet.checkImage(ctx, image, device == MediaCd); err != nil {
		return fmt.Errorf("%w: %w", ErrBadImage, err)
	}
	ins, wp := true, true
	if inserted != nil {
		ins = *inserted
	}
	if writeProtected != nil {
		wp = *writeProtected
	}
	return s.updateIf(pre, func(st *State) (bool, error) {
		st.Media[device] = Media{Image: image, Inserted: ins, WriteProtected: wp}
		return true, nil
	})
}

// EjectMedia detaches the device's image; ejecting an empty device is not an error.
func (s *Server) EjectMedia(device string, pre Precondition) error {
	if !slices.Contains(MediaDevices, device) {
		return fmt.Errorf("%w: virtual media %s", ErrNotFound, device)
	}
	return s.updateIf(pre, func(st *State) (bool, error) {
		m := st.Media[device]
		if m.Image == "" && !m.Inserted {
			return false, nil
		}
		st.Media[device] = Media{WriteProtected: m.WriteProtected}
		return true, nil
	})
}

// checkImage fetches an image the way a BMC does on insert: all of it, keeping only the head. An
// ISO must carry the ISO 9660 identifier.
func (f *Fleet) checkImage(ctx context.Context, image string, wantISO bool) error {
	resp, err := f.get(ctx, image)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	head := make([]byte, iso.HeaderSize)
	n, err := io.ReadFull(resp.Body, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading %s: %w", image, err)
	}
	if wantISO && !iso.HasSignature(head[:n]) {
		return fmt.Errorf("%s is not an ISO 9660 image", image)
	}
	if n == 0 {
		return fmt.Errorf("%s is empty", image)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("reading %s: %w", image, err)
	}
	return nil
}

// fetchImage reads a whole boot image into memory for the agent.
func (f *Fleet) fetchImage(ctx context.Context, image string) ([]byte, error) {
	resp, err := f.get(ctx, image)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBootImage+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", image, err)
	}
	if len(data) > maxBootImage {
		return nil, fmt.Errorf("%s is larger than %d MiB", image, maxBootImage>>20)
	}
	if !iso.HasSignature(data) {
		return nil, fmt.Errorf("%s is not an ISO 9660 image", image)
	}
	return data, nil
}

func (f *Fleet) get(ctx context.Context, image string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", image, err)
	}
	resp, err := f.fetch.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", image, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("fetching %s: HTTP %d", image, resp.StatusCode)
	}
	return resp, nil
}
