package imagebuild

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

// checksummer computes images' sha256. The hash of the base up to the patch is saved when the
// base is opened, so an image costs the patch plus the bytes after it: nothing more for an
// initrd (the archive is appended), the rest of the ISO after its embed area for an ISO, which on
// a CoreOS ISO is most of it (the root filesystem follows). Those are hashed by one background
// worker, so that building many images is not held up by reading the base again for each; the
// PreprovisioningImage gets its checksum annotation when the worker is done. A checksum that
// failed (the base unreadable for a while) is tried again after a growing delay, not left
// missing until a restart.
type checksummer struct {
	b        *Builder
	mu       sync.Mutex
	queue    []job
	pending  map[string]bool // uid/image
	failures map[string]int  // uid/image → failed attempts so far
	wake     chan struct{}
	// retryMin is the delay before the first retry; it doubles up to retryMax.
	retryMin, retryMax time.Duration
}

type job struct{ uid, image string }

func (c *checksummer) init(b *Builder) {
	c.b, c.pending, c.failures, c.wake = b, map[string]bool{}, map[string]int{}, make(chan struct{}, 1)
	c.retryMin, c.retryMax = 10*time.Second, 10*time.Minute
}

// quick returns the checksum when computing it reads at most SyncChecksumLimit bytes of the base.
func (c *checksummer) quick(r *imagestore.Record) (string, bool, error) {
	if r.Size-(r.PatchOffset+r.PatchLength) > c.b.cfg.SyncChecksumLimit {
		return "", false, nil
	}
	sum, err := c.b.checksum(r)
	return sum, err == nil, err
}

func (c *checksummer) enqueue(uid, image string) {
	c.mu.Lock()
	k := uid + "/" + image
	if !c.pending[k] {
		c.pending[k] = true
		c.queue = append(c.queue, job{uid, image})
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checksummer) next() (job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return job{}, false
	}
	j := c.queue[0]
	c.queue = c.queue[1:]
	delete(c.pending, j.uid+"/"+j.image)
	return j, true
}

func (c *checksummer) run(ctx context.Context) error {
	for {
		j, ok := c.next()
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-c.wake:
				continue
			}
		}
		r := c.b.cfg.Store.Get(j.uid)
		if r == nil || r.Image != j.image || r.SHA256 != "" {
			c.forget(j) // replaced or deleted meanwhile, or done
			continue
		}
		sum, err := c.b.checksum(r)
		if err == nil {
			err = c.b.cfg.Store.SetChecksum(j.uid, j.image, sum)
		}
		if errors.Is(err, errBaseGone) {
			// The controller builds the image again on the current base; nothing to retry.
			c.forget(j)
			c.b.cfg.Log.Info("Not computing the checksum of an image whose base was replaced", "image", j.image)
			continue
		}
		if err != nil {
			delay := c.failed(j)
			c.b.cfg.Log.Error(err, "Computing an image checksum", "image", j.image, "retryIn", delay)
			time.AfterFunc(delay, func() {
				if ctx.Err() == nil { // not for a worker that stopped
					c.enqueue(j.uid, j.image)
				}
			})
			continue
		}
		c.forget(j)
		if c.b.cfg.OnChecksum != nil {
			c.b.cfg.OnChecksum(r)
		}
	}
}

// failed counts a failed attempt and returns the delay before the next.
func (c *checksummer) failed(j job) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := j.uid + "/" + j.image
	n := c.failures[k]
	c.failures[k] = n + 1
	delay := c.retryMin
	for ; n > 0 && delay < c.retryMax; n-- {
		delay *= 2
	}
	return min(delay, c.retryMax)
}

// forget drops a job's failure count (done, or its image is gone).
func (c *checksummer) forget(j job) {
	c.mu.Lock()
	delete(c.failures, j.uid+"/"+j.image)
	c.mu.Unlock()
}

// pendingChecksums queues the records restored from the work directory that have none.
func (b *Builder) pendingChecksums(records []*imagestore.Record) {
	for _, r := range records {
		if r.SHA256 == "" {
			b.sums.enqueue(r.UID, r.Image)
		}
	}
}

// errBaseGone: the record's base is no longer one of the bases the builder serves from.
var errBaseGone = errors.New("checksum: the record's base is not one of the current bases")

// checksum is the image's sha256 (hex), resuming from the state saved at the patch.
func (b *Builder) checksum(r *imagestore.Record) (string, error) {
	h, err := b.hashBefore(r)
	if err != nil {
		return "", err
	}
	f, err := os.Open(r.Base)
	if err != nil {
		return "", fmt.Errorf("checksum of %s: %w", r.Image, err)
	}
	defer f.Close()
	from := r.PatchOffset
	if _, err := io.Copy(h, io.NewSectionReader(r.ReaderAt(f), from, r.Size-from)); err != nil {
		return "", fmt.Errorf("checksum of %s: %w", r.Image, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashBefore returns a hash that has consumed the image before its patch.
func (b *Builder) hashBefore(r *imagestore.Record) (hash.Hash, error) {
	set := b.cfg.Catalog.For(r.Arch)
	if iso := b.isos[r.Arch]; iso != nil && iso.Path == r.Base && r.PatchOffset == iso.Area.Offset {
		return iso.HashBeforeArea()
	}
	if set != nil && set.Initrd != nil && set.Initrd.Path == r.Base && r.PatchOffset >= set.Initrd.Size {
		h, err := set.Initrd.HashAfter()
		if err != nil {
			return nil, err
		}
		h.Write(make([]byte, r.PatchOffset-set.Initrd.Size)) // alignment zeros
		return h, nil
	}
	return nil, errBaseGone
}
