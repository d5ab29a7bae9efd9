package images

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/test/builder"
)

const hostTimeout = 5 * time.Minute

// nmstate is static network data for the server's boot NIC, matched by MAC.
func nmstate(mac, ip string) string {
	return fmt.Sprintf(`interfaces:
- name: eno1
  type: ethernet
  state: up
  mac-address: %s
  identifier: mac-address
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: %s
      prefix-length: 24
  ipv6:
    enabled: false
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 10.20.30.1
    next-hop-interface: eno1
dns-resolver:
  config:
    server: [10.20.30.53]
`, mac, ip)
}

// newHost creates the BMC Secret, the network data Secret and the host (virtual media, online,
// image, no automated cleaning: one agent boot less).
func (s *suite) newHost(t *testing.T, ns, name string, srv bmcsim.Host, network string) {
	t.Helper()
	bmc := builder.BMCSecret(ns, name+"-bmc", srv.Username, srv.Password)
	nd := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-network"}, StringData: map[string]string{"nmstate": network}}
	raw := "raw"
	img := metal3.Image{URL: s.Images.URL + "/disk.img", Checksum: s.Images.SHA256("/disk.img"), ChecksumType: metal3.SHA256, DiskFormat: &raw}
	host := builder.BareMetalHost(ns, name).
		WithBMC(srv.Addresses["redfish-virtualmedia+http"], bmc.Name).
		WithBootMACAddress(srv.BootMAC).WithOnline(true).WithImageSpec(img).
		WithAutomatedCleaningMode(metal3.CleaningModeDisabled).
		WithPreprovisioningNetworkData(nd.Name).Build()
	for _, obj := range []client.Object{bmc, nd, host} {
		if err := s.c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
}

func (s *suite) host(t *testing.T, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	h := &metal3.BareMetalHost{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
		t.Fatalf("getting host %s: %v", name, err)
	}
	return h
}

func (s *suite) wait(t *testing.T, ns, name, what string, cond func(*metal3.BareMetalHost) bool) *metal3.BareMetalHost {
	t.Helper()
	start := time.Now()
	for {
		h := s.host(t, ns, name)
		if cond(h) {
			t.Logf("%s: %s after %s", name, what, time.Since(start).Round(100*time.Millisecond))
			return h
		}
		if time.Since(start) > hostTimeout {
			ppi := &metal3.PreprovisioningImage{}
			_ = s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, ppi)
			t.Fatalf("%s: not %s after %s; state %s, error %q %q; image status %+v\noperator log:\n%s\ncontroller log:\n%s",
				name, what, hostTimeout, h.Status.Provisioning.State, h.Status.ErrorType, h.Status.ErrorMessage, ppi.Status,
				s.op.Tail(15), s.icc.Tail(15))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *suite) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "images-"}}
	if err := s.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// checkAddress: the host's HardwareData (what Ironic's inspection found) shows the address of its
// network data on its boot NIC.
func (s *suite) checkAddress(t *testing.T, ns, name, mac, ip string) {
	t.Helper()
	var hd metal3.HardwareData
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &hd); err != nil {
		t.Fatalf("%s: HardwareData: %v", name, err)
	}
	if hd.Spec.HardwareDetails == nil {
		t.Fatalf("%s: HardwareData has no details", name)
	}
	for _, nic := range hd.Spec.HardwareDetails.NIC {
		if strings.EqualFold(nic.MAC, mac) {
			if nic.IP != ip {
				t.Errorf("%s: NIC %s has address %q, the network data says %s", name, mac, nic.IP, ip)
			}
			return
		}
	}
	t.Errorf("%s: HardwareData has no NIC %s: %+v", name, mac, hd.Spec.HardwareDetails.NIC)
}

// Hosts with their own static network data go register → inspect → provisioned booting their own
// images; each agent came up with its own address, which Ironic's inspection and the host's
// HardwareData show. Once provisioned, the host's image is deleted and no longer served.
func TestStaticAddresses(t *testing.T) {
	s := e2e(t)
	ns := s.namespace(t)
	type tc struct {
		name, mac, ip string
	}
	var hosts []tc
	for i := range 3 {
		srv := s.Take(t)
		h := tc{name: fmt.Sprintf("static-%d", i), mac: srv.BootMAC, ip: fmt.Sprintf("10.20.30.%d", 10+i)}
		s.newHost(t, ns, h.name, srv, nmstate(h.mac, h.ip))
		hosts = append(hosts, h)
	}
	urls := map[string]string{}
	for _, h := range hosts {
		// The image: built by the controller for this host, with its network data.
		s.wait(t, ns, h.name, "past registering", func(b *metal3.BareMetalHost) bool {
			ppi := &metal3.PreprovisioningImage{}
			if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: h.name}, ppi); err == nil && ppi.Status.ImageURL != "" {
				urls[h.name] = ppi.Status.ImageURL
				if ppi.Status.NetworkData.Name != h.name+"-network" || !strings.HasPrefix(ppi.Status.ImageURL, s.publish+"/") {
					t.Errorf("%s: image status %+v", h.name, ppi.Status)
				}
			}
			return b.Status.Provisioning.State != metal3.StateRegistering && b.Status.Provisioning.State != ""
		})
	}
	for _, h := range hosts {
		s.wait(t, ns, h.name, "provisioned", func(b *metal3.BareMetalHost) bool {
			return b.Status.Provisioning.State == metal3.StateProvisioned && b.Status.ErrorType == ""
		})
		s.checkAddress(t, ns, h.name, h.mac, h.ip)
	}
	for _, h := range hosts {
		if urls[h.name] == "" {
			t.Errorf("%s: never saw its image URL", h.name)
			continue
		}
		// Provisioned: the operator deletes the image and the controller stops serving it.
		deadline := time.Now().Add(time.Minute)
		for {
			err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: h.name}, &metal3.PreprovisioningImage{})
			resp, gerr := http.Head(urls[h.name]) //nolint:noctx // local
			gone := apierrors.IsNotFound(err) && gerr == nil && resp.StatusCode == http.StatusNotFound
			if gerr == nil {
				resp.Body.Close()
			}
			if gone {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: image still there after provisioning (%v)", h.name, err)
				break
			}
			time.Sleep(time.Second)
		}
	}
}

// Invalid network data: the controller's error (naming the nmstate field) shows on the host as a
// registration error; fixing the Secret lets the host go on.
func TestInvalidNetworkDataRecovers(t *testing.T) {
	s := e2e(t)
	ns := s.namespace(t)
	srv := s.Take(t)
	bad := strings.Replace(nmstate(srv.BootMAC, "10.20.31.10"), "prefix-length: 24", "prefix-length: 33", 1)
	s.newHost(t, ns, "broken", srv, bad)
	h := s.wait(t, ns, "broken", "a registration error naming the field", func(b *metal3.BareMetalHost) bool {
		return b.Status.ErrorType == metal3.RegistrationError && strings.Contains(b.Status.ErrorMessage, "interfaces[0].ipv4.address[0].prefix-length")
	})
	t.Logf("broken: %s", h.Status.ErrorMessage)
	nd := &corev1.Secret{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "broken-network"}, nd); err != nil {
		t.Fatal(err)
	}
	nd.Data = map[string][]byte{"nmstate": []byte(nmstate(srv.BootMAC, "10.20.31.10"))}
	if err := s.c.Update(context.Background(), nd); err != nil {
		t.Fatal(err)
	}
	s.wait(t, ns, "broken", "provisioned", func(b *metal3.BareMetalHost) bool {
		return b.Status.Provisioning.State == metal3.StateProvisioned && b.Status.ErrorType == ""
	})
	s.checkAddress(t, ns, "broken", srv.BootMAC, "10.20.31.10")
}
