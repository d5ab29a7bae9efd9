// Command deployimage is the small helper of hack/ironic-up.sh: it writes the project's deploy images,
// serves Ironic's http_root, and answers the script's port and readiness questions (so the script
// needs neither curl nor python on the host).
//
//	deployimage build --out DIR --api-url URL   write agent.kernel, agent.initramfs, esp.img, agent.iso
//	deployimage serve --root DIR --listen ADDR  static HTTP server (GET/HEAD, Range, no listings)
//	deployimage freeport [--check PORT]         print a free loopback port / fail if PORT is taken
//	deployimage wait [--timeout D] [--pid N] [--want S] URL
//	                                            wait for 200 (with S in the body) while pid N lives
//	deployimage apiversion URL                  print the maximum API version of an Ironic root URL
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("usage: deployimage build|serve|freeport|wait|apiversion ...")
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = build(args)
	case "serve":
		err = serve(args)
	case "freeport":
		err = freeport(args)
	case "wait":
		err = wait(args)
	case "apiversion":
		err = apiversion(args)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	if err != nil {
		log.Fatalf("deployimage: %v", err)
	}
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	out := fs.String("out", "", "output directory")
	apiURL := fs.String("api-url", "", "Ironic API URL baked into the ISO as ipa-api-url")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("build: --out is required")
	}
	iso, err := deployimage.ISO(*apiURL)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"agent.kernel":    deployimage.Kernel(),
		"agent.initramfs": deployimage.Ramdisk(),
		"esp.img":         deployimage.ESP(),
		"agent.iso":       iso,
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		p := filepath.Join(*out, name)
		// Unchanged files keep their mtime, so Ironic's image cache (keyed on Last-Modified) stays valid.
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := os.WriteFile(p+".tmp", data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "ironic: deploy images in %s (ISO %d bytes, ipa-api-url=%s)\n", *out, len(iso), *apiURL)
	return nil
}

// serve is a static file server without directory listings: image URLs must not be discoverable.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	root := fs.String("root", "", "directory to serve")
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	_ = fs.Parse(args)
	if *root == "" {
		return errors.New("serve: --root is required")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel := filepath.Clean("/" + r.URL.Path)
		f, err := os.Open(filepath.Join(*root, rel))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		log.Printf("%s %s %s", r.RemoteAddr, r.Method, r.URL.Path)
		http.ServeContent(w, r, st.Name(), st.ModTime(), f)
	})
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	return srv.Serve(l)
}

func freeport(args []string) error {
	fs := flag.NewFlagSet("freeport", flag.ExitOnError)
	check := fs.Int("check", 0, "exit non-zero if this port is taken")
	_ = fs.Parse(args)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*check))
	if err != nil {
		return fmt.Errorf("port %d: %w", *check, err)
	}
	defer l.Close()
	if *check == 0 {
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

func wait(args []string) error {
	fs := flag.NewFlagSet("wait", flag.ExitOnError)
	timeout := fs.Duration("timeout", 60*time.Second, "give up after")
	pid := fs.Int("pid", 0, "fail as soon as this process is gone")
	want := fs.String("want", "", "a string the body must contain")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("wait: one URL expected")
	}
	url := fs.Arg(0)
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(*timeout)
	var last string
	for {
		if *pid > 0 && syscall.Kill(*pid, 0) != nil {
			return fmt.Errorf("process %d exited while waiting for %s (%s)", *pid, url, last)
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), *want) {
				os.Stdout.Write(body)
				return nil
			}
			last = fmt.Sprintf("HTTP %d", resp.StatusCode)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %s", url, *timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func apiversion(args []string) error {
	if len(args) != 1 {
		return errors.New("apiversion: one URL expected")
	}
	resp, err := http.Get(args[0])
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var root struct {
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
		return fmt.Errorf("decoding %s: %w", args[0], err)
	}
	fmt.Println(root.DefaultVersion.Version)
	return nil
}
