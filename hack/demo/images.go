package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/test/loopback"
)

// iccGrace is the demo's grace period before an image is built (60 s in production; seed 001).
const iccGrace = "5s"

// startICC writes the CoreOS-layout base images and starts bin/image-customization-controller.
func (d *demo) startICC(ctx context.Context) error {
	d.step("writing a CoreOS-layout live ISO, initramfs and kernel for the agent images")
	iso := filepath.Join(d.dir, "ironic-python-agent.iso")
	if err := deployimage.WriteLiveISO(iso, deployimage.LiveOptions{}); err != nil {
		return err
	}
	initrd, kernel := filepath.Join(d.dir, "ironic-python-agent.initramfs"), filepath.Join(d.dir, "ironic-python-agent.kernel")
	if err := os.WriteFile(initrd, deployimage.LiveInitramfs(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(kernel, deployimage.Kernel(), 0o644); err != nil {
		return err
	}
	addr, probe := loopback.FreeAddr(), loopback.FreeAddr()
	d.step("starting bin/image-customization-controller (images at http://" + addr + ", grace period " + iccGrace + ")")
	env := []string{
		"KUBECONFIG=" + d.kube.KubeconfigPath, "DEPLOY_ISO=" + iso, "DEPLOY_INITRD=" + initrd, "DEPLOY_KERNEL=" + kernel,
		"IRONIC_BASE_URL=" + d.ironic.URL(), "IRONIC_AGENT_IMAGE=quay.io/metal3-io/ironic-agent",
	}
	var err error
	if d.icc, err = d.startProcess("image-customization-controller", filepath.Join(d.o.bin, "image-customization-controller"), env,
		"-images-bind-addr="+addr, "-images-publish-addr=http://"+addr, "-work-dir="+filepath.Join(d.dir, "icc-work"),
		"-grace-period="+iccGrace, "-namespace="+namespace, "-health-probe-bind-address="+probe, "-v=2"); err != nil {
		return err
	}
	return d.icc.WaitHTTP(ctx, "http://"+probe+"/readyz")
}

// networkData is host i's static address on its boot NIC (matched by MAC), as nmstate.
func networkData(host, mac string, i int) *corev1.Secret {
	doc := fmt.Sprintf(`interfaces:
- name: eno1
  type: ethernet
  state: up
  mac-address: %s
  identifier: mac-address
  ipv4:
    enabled: true
    address: [{ip: 10.20.0.%d, prefix-length: 24}]
routes:
  config:
  - {destination: 0.0.0.0/0, next-hop-address: 10.20.0.1, next-hop-interface: eno1}
dns-resolver:
  config:
    server: [10.20.0.53]
`, mac, 10+i)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: host + "-network"}, StringData: map[string]string{"nmstate": doc}}
}

// agentAddresses are the addresses each host's agent reported on its boot NIC (its HardwareData,
// from Ironic's inspection); nil without per-host images.
func (d *demo) agentAddresses(ctx context.Context) map[string]string {
	if !d.o.images {
		return nil
	}
	var hosts metal3.BareMetalHostList
	var hds metal3.HardwareDataList
	if d.kube.Client.List(ctx, &hosts, client.InNamespace(namespace)) != nil || d.kube.Client.List(ctx, &hds, client.InNamespace(namespace)) != nil {
		return map[string]string{}
	}
	boot := map[string]string{}
	for _, h := range hosts.Items {
		boot[h.Name] = strings.ToLower(h.Spec.BootMACAddress)
	}
	out := map[string]string{}
	for _, hd := range hds.Items {
		if hd.Spec.HardwareDetails == nil {
			continue
		}
		for _, nic := range hd.Spec.HardwareDetails.NIC {
			if strings.ToLower(nic.MAC) == boot[hd.Name] && nic.IP != "" {
				out[hd.Name] = nic.IP
			}
		}
	}
	return out
}
