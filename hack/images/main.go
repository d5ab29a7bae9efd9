// Command images builds the project's container images as OCI image layouts under -out (one
// directory per image, tagged latest), offline (internal/images). The cluster-baremetal-operator's
// image carries the release manifests of manifests/ in /manifests. `make images` runs it.
package main

import (
	"context"
	"flag"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/metalforge/metalforge/internal/images"
	"github.com/metalforge/metalforge/internal/release"
)

func main() {
	out := flag.String("out", filepath.Join("_output", "images"), "output directory")
	flag.Parse()
	manifests, err := release.ReadDir("manifests")
	if err != nil {
		log.Fatal(err)
	}
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	paths, err := images.Build(context.Background(), root, *out, images.Specs(manifests))
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		log.Printf("%s: oci:%s:latest", name, paths[name])
	}
}
