package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"
)

// The hardware managers the agent advertises. Step names, interfaces and priorities follow
// ironic-python-agent's GenericHardwareManager and the CoreOS install manager of metal3's agent
// image (install_coreos, start_assisted_install: priority 0, so they run only when requested).
const (
	genericManager = "GenericHardwareManager"
	coreosManager  = "CoreOSInstallHardwareManager"
)

var hardwareManagerVersion = map[string]string{
	"generic_hardware_manager": "1.2",
	"coreos_install":           "1.0",
}

type stepDef struct {
	Step            string         `json:"step"`
	Priority        int            `json:"priority"`
	Interface       string         `json:"interface"`
	RebootRequested bool           `json:"reboot_requested"`
	Abortable       bool           `json:"abortable"`
	ArgsInfo        map[string]any `json:"argsinfo,omitempty"`
}

var cleanSteps = map[string][]stepDef{
	genericManager: {
		{Step: "erase_devices", Priority: 10, Interface: "deploy", Abortable: true},
		{Step: "erase_devices_metadata", Priority: 99, Interface: "deploy", Abortable: true},
		{Step: "erase_devices_express", Priority: 0, Interface: "deploy", Abortable: true},
		{Step: "erase_pstore", Priority: 0, Interface: "deploy", Abortable: true},
		{Step: "delete_configuration", Priority: 0, Interface: "raid", Abortable: true},
		{Step: "create_configuration", Priority: 0, Interface: "raid", Abortable: true},
		{Step: "burnin_cpu", Priority: 0, Interface: "deploy", Abortable: true},
		{Step: "burnin_memory", Priority: 0, Interface: "deploy", Abortable: true},
	},
}

var deploySteps = map[string][]stepDef{
	genericManager: {
		{Step: "erase_devices_metadata", Priority: 0, Interface: "deploy"},
		{Step: "apply_configuration", Priority: 0, Interface: "raid", ArgsInfo: map[string]any{
			"raid_config":     map[string]any{"description": "The RAID configuration to apply.", "required": true},
			"delete_existing": map[string]any{"description": "Delete existing RAID first.", "required": false},
		}},
		{Step: "write_image", Priority: 0, Interface: "deploy"},
		{Step: "inject_files", Priority: 0, Interface: "deploy"},
	},
	coreosManager: {
		{Step: "install_coreos", Priority: 0, Interface: "deploy"},
		{Step: "start_assisted_install", Priority: 0, Interface: "deploy"},
	},
}

var serviceSteps = map[string][]stepDef{
	genericManager: {
		{Step: "burnin_cpu", Priority: 0, Interface: "deploy", Abortable: true},
		{Step: "burnin_memory", Priority: 0, Interface: "deploy", Abortable: true},
		{Step: "apply_configuration", Priority: 0, Interface: "raid"},
	},
}

var handlers = map[string]handler{
	"clean.get_clean_steps":         {run: getSteps("clean", cleanSteps)},
	"deploy.get_deploy_steps":       {run: getSteps("deploy", deploySteps)},
	"service.get_service_steps":     {run: getSteps("service", serviceSteps)},
	"clean.execute_clean_step":      {async: true, run: executeStep("clean", cleanSteps)},
	"deploy.execute_deploy_step":    {async: true, run: executeStep("deploy", deploySteps)},
	"service.execute_service_step":  {async: true, run: executeStep("service", serviceSteps)},
	"standby.get_partition_uuids":   {run: getPartitionUUIDs},
	"standby.sync":                  {run: func(context.Context, *agentInstance, map[string]any) (any, error) { return nil, nil }},
	"standby.power_off":             {async: true, run: func(context.Context, *agentInstance, map[string]any) (any, error) { return nil, nil }},
	"standby.get_os_install_status": {run: func(context.Context, *agentInstance, map[string]any) (any, error) { return nil, nil }},
	"image.install_bootloader":      {async: true, run: installBootloader},
	"log.collect_system_logs":       {run: collectLogs},
}

func getSteps(kind string, steps map[string][]stepDef) func(context.Context, *agentInstance, map[string]any) (any, error) {
	return func(context.Context, *agentInstance, map[string]any) (any, error) {
		return map[string]any{kind + "_steps": steps, "hardware_manager_version": hardwareManagerVersion}, nil
	}
}

// executeStep runs execute_<kind>_step; the result names the step, which Ironic compares with the
// step it waits for (agent_base._get_completed_command).
func executeStep(kind string, steps map[string][]stepDef) func(context.Context, *agentInstance, map[string]any) (any, error) {
	return func(ctx context.Context, a *agentInstance, params map[string]any) (any, error) {
		step, _ := params["step"].(map[string]any)
		name, _ := step["step"].(string)
		iface, _ := step["interface"].(string)
		known := false
		for _, list := range steps {
			for _, s := range list {
				if s.Step == name && s.Interface == iface {
					known = true
				}
			}
		}
		if !known {
			return nil, failf("HardwareManagerMethodNotFound", "No HardwareManager found to handle method: %s (interface %s) is not a %s step of this agent", name, iface, kind)
		}
		args, _ := step["args"].(map[string]any)
		res, err := runStep(ctx, a, kind, name, args, params)
		if err != nil {
			return nil, err
		}
		return map[string]any{kind + "_result": res, kind + "_step": step}, nil
	}
}

func runStep(ctx context.Context, a *agentInstance, kind, name string, args, params map[string]any) (any, error) {
	cfg := a.r.cfg
	switch name {
	case "write_image":
		return nil, writeImage(ctx, a, args)
	case "erase_devices":
		n := max(1, len(a.m.Inventory().Disks))
		if !a.sleep(time.Duration(n) * cfg.EraseDuration) {
			return nil, errCrashed
		}
		return map[string]any{}, nil
	case "install_coreos", "start_assisted_install":
		if !a.sleep(cfg.StepDuration) {
			return nil, errCrashed
		}
		src := "coreos-installer://" + name
		if node, ok := params["node"].(map[string]any); ok {
			if ii, ok := node["instance_info"].(map[string]any); ok {
				if s, _ := ii["image_source"].(string); s != "" {
					src = s
				}
			}
		}
		a.m.WriteDisk(src)
		a.event("%s wrote the disk (%s)", name, src)
		return nil, nil
	default:
		if !a.sleep(cfg.StepDuration) {
			return nil, errCrashed
		}
		return nil, nil
	}
}

// writeImage simulates the direct deploy: size the image (HEAD), verify its checksum when small
// enough to download, "write" at WriteSpeedMBps, and record the disk content on the machine.
// Machine.FailDeploy makes the agent crash half-way.
func writeImage(ctx context.Context, a *agentInstance, args map[string]any) error {
	info, _ := args["image_info"].(map[string]any)
	var url string
	if urls, ok := info["urls"].([]any); ok && len(urls) > 0 {
		url, _ = urls[0].(string)
	}
	if url == "" {
		return failf("ImageDownloadError", "write_image: image_info has no urls")
	}
	size, err := imageSize(ctx, a, url)
	if err != nil {
		return failf("ImageDownloadError", "Error downloading image: %v", err)
	}
	algo, _ := info["os_hash_algo"].(string)
	want, _ := info["os_hash_value"].(string)
	if want == "" {
		if c, _ := info["checksum"].(string); c != "" && !strings.Contains(c, "://") {
			algo, want = "md5", c
		}
	}
	if want != "" && a.r.cfg.VerifyLimit > 0 && size >= 0 && size <= a.r.cfg.VerifyLimit {
		got, err := imageHash(ctx, a, url, algo)
		if err != nil {
			return failf("ImageDownloadError", "Error downloading image: %v", err)
		}
		if !strings.EqualFold(got, want) {
			return failf("ImageChecksumError", "The checksum of image %s does not match: expected %s, got %s (%s)", url, want, got, algo)
		}
	}
	if size < 0 {
		size = 0
	}
	d := time.Duration(float64(size) / (a.r.cfg.WriteSpeedMBps * 1e6) * float64(time.Second))
	a.event("writing image %s (%d bytes, %s)", url, size, d)
	if a.m.FailDeploy() {
		a.sleep(d / 2)
		a.crash("fault injection: crash in the middle of write_image")
		return errCrashed
	}
	if !a.sleep(d) {
		return errCrashed
	}
	a.m.WriteDisk(url)
	return nil
}

func imageSize(ctx context.Context, a *agentInstance, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HEAD %s: HTTP %d", url, resp.StatusCode)
	}
	return resp.ContentLength, nil
}

func imageHash(ctx context.Context, a *agentInstance, url, algo string) (string, error) {
	var h hash.Hash
	switch strings.ToLower(algo) {
	case "md5":
		h = md5.New()
	case "sha1":
		h = sha1.New()
	case "sha256", "":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return "", fmt.Errorf("unsupported hash algorithm %q", algo)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	if _, err := io.Copy(h, resp.Body); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// getPartitionUUIDs answers with stable per-machine identifiers, as IPA does after write_image.
func getPartitionUUIDs(_ context.Context, a *agentInstance, _ map[string]any) (any, error) {
	sum := sha256.Sum256([]byte("metalforge-disk-" + a.m.ID()))
	h := hex.EncodeToString(sum[:])
	u := func(s string) string {
		return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
	}
	return map[string]any{
		"root uuid":                 u(h[0:32]),
		"efi system partition uuid": u(h[32:64]),
		"PReP Boot partition uuid":  nil,
		"partitions": map[string]any{
			"root":                 "/dev/sda2",
			"efi system partition": "/dev/sda1",
		},
	}, nil
}

func installBootloader(_ context.Context, a *agentInstance, params map[string]any) (any, error) {
	if !a.sleep(a.r.cfg.StepDuration) {
		return nil, errCrashed
	}
	a.event("bootloader installed (boot mode %v)", params["target_boot_mode"])
	return nil, nil
}

// collectLogs returns the agent's events as a gzipped tarball, the shape Ironic stores under
// [agent]deploy_logs_local_path.
func collectLogs(_ context.Context, a *agentInstance, _ map[string]any) (any, error) {
	a.mu.Lock()
	text := strings.Join(a.events, "\n") + "\n"
	a.mu.Unlock()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "journal", Mode: 0o644, Size: int64(len(text)), ModTime: time.Now()}); err != nil {
		return nil, err
	}
	if _, err := tw.Write([]byte(text)); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return map[string]any{"system_logs": base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}
