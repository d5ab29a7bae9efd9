// Command manifests writes the release manifests (internal/release) into manifests/, replacing
// what is there. `make manifests` runs it after `make generate`.
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"

	"github.com/metalforge/metalforge/internal/release"
)

func main() {
	out := flag.String("out", "manifests", "output directory")
	flag.Parse()
	in, err := release.ReadInputs(".")
	if err != nil {
		log.Fatal(err)
	}
	files, err := release.Manifests(in)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.RemoveAll(*out); err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil { //nolint:gosec // manifests are public
			log.Fatal(err)
		}
	}
	log.Printf("wrote %d files to %s", len(files), *out)
}
