package ironic

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

const testNodeID = "1be26c0b-03f2-4d2d-ae87-c02d7f33c123"

func TestDataImageFailureMessage(t *testing.T) {
	tests := map[string]struct{ lastError, want string }{
		"download refused": {
			lastError: "Could not attach device cdrom to node " + testNodeID + ": Failed to download image http://user:s3cret@images/data.iso, reason: HTTP 404 (req-0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f)",
			want:      "Ironic could not attach the image to the host's virtual CD: Failed to download image http://***@images/data.iso, reason: HTTP 404",
		},
		"the BMC refused": {
			lastError: "Could not attach device cdrom to node " + testNodeID + ": Virtual media mount failed for node " + testNodeID +
				" with image http://ironic/redfish/cdrom-" + testNodeID + ".iso. Error: returned code 400. Extended information: [{'Message': 'not an ISO'}]",
			want: "Ironic could not attach the image to the host's virtual CD: Virtual media mount failed with image http://ironic/redfish/cdrom-<node>.iso. Error: returned code 400.",
		},
		"detach, with the BMC password": {
			lastError: "Could not detach device(s) ['cdrom'] from node " + testNodeID + ": login as admin/hunter22 refused",
			want:      "Ironic could not eject the host's virtual CD: login as admin/****** refused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := dataImageFailureMessage(tc.lastError, testNodeID, "hunter22"); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestDataImageFailureIsNoOtherOperationsFailure: a failed attach's last_error is set aside from
// the node every operation decides on (and kept for DataImage), so that a reboot asked before it
// is not reported as failed with the attach's reason, and a node in deploy failed keeps the
// deployment's reason rather than the attach's.
func TestDataImageFailureIsNoOtherOperationsFailure(t *testing.T) {
	p := &Provisioner{}
	attach := vmediaAttachFailed + " cdrom to node " + testNodeID + ": HTTP 404"
	n := p.setAsideVmediaFailure(&nodes.Node{UUID: testNodeID, ProvisionState: string(nodes.Active), PowerState: powerOn, LastError: attach})
	if n.LastError != "" {
		t.Fatalf("last_error %q left on the node the decisions read", n.LastError)
	}
	if d := decideReboot(n, metal3.RebootModeHard, rebooting); d.act != actDone {
		t.Errorf("a reboot asked before the failed attach: %s %q; want done", d.act, d.msg)
	}
	if got, ok := p.memory.dataImageFailure(testNodeID); !ok || got != attach {
		t.Errorf("remembered failure %q %t; want the attach's last_error", got, ok)
	}
	other := &nodes.Node{UUID: testNodeID, LastError: "Failed to deploy: disk full"}
	if p.setAsideVmediaFailure(other) != other {
		t.Error("another operation's last_error was set aside")
	}
	if !vmediaFailure(vmediaDetachFailed+"(s) ['cdrom'] from node x: y") || vmediaFailure("Deploy failed: Could not attach device") {
		t.Error("vmediaFailure: want Ironic's prefixes only at the start")
	}
}

// TestDataImageNeedsAPI193: an Ironic whose API cannot read virtual media back (1.89 to 1.92) gets
// a clear error from every DataImage call, before any request about the node.
func TestDataImageNeedsAPI193(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoint = "http://127.0.0.1:1/v1/"
	p, err := New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	f, err := chooseFeatures(1, 1, 1, 92)
	if err != nil {
		t.Fatal(err)
	}
	p.sess.Store(&session{sc: p.base, features: f})
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: testNodeID}
	_, err = p.DataImage(context.Background(), host)
	if !errors.Is(err, ErrIronicTooOld) || !strings.Contains(err.Error(), "1.92") || !strings.Contains(err.Error(), "1.93") {
		t.Errorf("DataImage: %v; want ErrIronicTooOld naming 1.92 and 1.93", err)
	}
	if _, err := p.AttachDataImage(context.Background(), host, "http://images/data.iso"); !errors.Is(err, ErrIronicTooOld) {
		t.Errorf("AttachDataImage: %v; want ErrIronicTooOld", err)
	}
	if _, err := p.DetachDataImage(context.Background(), host); !errors.Is(err, ErrIronicTooOld) {
		t.Errorf("DetachDataImage: %v; want ErrIronicTooOld", err)
	}
	if n := p.Calls()["dataimage"]; n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
}

// TestDataImageInserted: the CD holds a DataImage when it holds anything but Ironic's own boot ISO
// for the node (left there by fast track while the agent runs on an available host).
func TestDataImageInserted(t *testing.T) {
	const uuid = testNodeID
	cd := func(inserted bool, image string) []virtualMedia {
		return []virtualMedia{{MediaTypes: []string{"Floppy"}}, {MediaTypes: []string{"CD", "DVD"}, Inserted: inserted, Image: image}}
	}
	for name, tc := range map[string]struct {
		media []virtualMedia
		want  bool
	}{
		"empty":                         {media: cd(false, ""), want: false},
		"the data image Ironic serves":  {media: cd(true, "http://192.0.2.2:6180/redfish/cdrom-"+uuid+".iso"), want: true},
		"the agent's ISO (fast track)":  {media: cd(true, "http://192.0.2.2:6180/redfish/boot-"+uuid+".iso"), want: false},
		"the agent's ISO, a temp URL":   {media: cd(true, "https://swift.example/v1/c/boot-"+uuid+".iso?temp_url_sig=x"), want: false},
		"the agent's ISO, a bare name":  {media: cd(true, "boot-"+uuid+".iso"), want: false},
		"another node's boot ISO":       {media: cd(true, "http://192.0.2.2:6180/redfish/boot-0000.iso"), want: true},
		"inserted, the BMC says no URL": {media: cd(true, ""), want: true},
		"no media":                      {want: false},
	} {
		if got := dataImageInserted(tc.media, uuid); got != tc.want {
			t.Errorf("%s: %t, want %t", name, got, tc.want)
		}
	}
}
