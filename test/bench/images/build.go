package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/scheme"
)

// baseISO returns a CoreOS-layout ISO of about size bytes (its root filesystem pseudo-random, so
// nothing in the path can shortcut zeros), kept in dir between runs.
func baseISO(dir string, size int64) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("live-%dm.iso", size>>20))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Printf("writing a %d MiB base ISO to %s (once)\n", size>>20, path)
	rootfs := path + ".rootfs"
	f, err := os.Create(rootfs)
	if err != nil {
		return "", err
	}
	defer os.Remove(rootfs)
	// Leave room for the rest of the live image (about 5 MiB).
	if _, err := io.CopyN(f, rand.NewChaCha8([32]byte{1}), size-5<<20); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := deployimage.WriteLiveISO(path+".tmp", deployimage.LiveOptions{RootfsSource: rootfs}); err != nil {
		return "", err
	}
	return path, os.Rename(path+".tmp", path)
}

type built struct {
	ready, summed time.Duration
	// images are the URLs and checksum annotations, in creation order.
	images []image
}

type image struct{ url, sum string }

func nmstate(i int) string {
	return fmt.Sprintf(`interfaces:
- name: eno1
  type: ethernet
  ipv4:
    enabled: true
    address: [{ip: 10.%d.%d.%d, prefix-length: 16}]
routes:
  config:
  - {destination: 0.0.0.0/0, next-hop-address: 10.%d.0.1, next-hop-interface: eno1}
`, 10+i>>16, (i>>8)&255, i&255, 10+i>>16)
}

// buildImages creates n network data Secrets and PreprovisioningImages at once and waits until
// every image is Ready and has its checksum annotation.
func buildImages(ctx context.Context, cfg *rest.Config, ns string, n int) (built, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return built{}, err
	}
	w, err := c.Watch(ctx, &metal3.PreprovisioningImageList{}, client.InNamespace(ns))
	if err != nil {
		return built{}, err
	}
	defer w.Stop()
	for i := range n {
		name := fmt.Sprintf("host-%04d", i)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-nd"}, Data: map[string][]byte{"nmstate": []byte(nmstate(i))}}
		if err := c.Create(ctx, sec); err != nil {
			return built{}, err
		}
	}
	fmt.Printf("creating %d PreprovisioningImages\n", n)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("host-%04d", i)
			ppi := &metal3.PreprovisioningImage{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: metal3.PreprovisioningImageSpec{
					NetworkDataName: name + "-nd", Architecture: "x86_64",
					AcceptFormats: []metal3.ImageFormat{metal3.ImageFormatISO},
				},
			}
			if err := c.Create(ctx, ppi); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return built{}, err
	}
	out := built{images: make([]image, n)}
	ready, summed := map[string]bool{}, map[string]bool{}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for len(summed) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return built{}, errors.New("watch ended")
			}
			p, isPPI := ev.Object.(*metal3.PreprovisioningImage)
			if !isPPI || ev.Type == watch.Deleted {
				continue
			}
			i, _ := strconv.Atoi(p.Name[len("host-"):])
			if isReady(p) && !ready[p.Name] {
				ready[p.Name] = true
				if len(ready) == n {
					out.ready = time.Since(start)
				}
			}
			if s := p.Annotations[metal3.ImageSHA256Annotation]; s != "" && isReady(p) && !summed[p.Name] {
				summed[p.Name] = true
				out.images[i] = image{url: p.Status.ImageURL, sum: s}
				if len(summed) == n {
					out.summed = time.Since(start)
				}
			}
		case <-tick.C:
			fmt.Printf("  %5.1f s: %d Ready, %d with their checksum\n", time.Since(start).Seconds(), len(ready), len(summed))
		case <-ctx.Done():
			return built{}, fmt.Errorf("%d Ready, %d with checksums: %w", len(ready), len(summed), ctx.Err())
		}
	}
	return out, nil
}

func isReady(p *metal3.PreprovisioningImage) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == string(metal3.ConditionImageReady) {
			return c.Status == metav1.ConditionTrue && p.Status.ImageURL != ""
		}
	}
	return false
}
