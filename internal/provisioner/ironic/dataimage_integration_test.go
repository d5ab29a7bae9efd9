package ironic

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestDataImageOnAnActiveNode: a DataImage attached to, and detached from, an active node through
// Ironic's virtual media API, with bmcsim's virtual CD as the witness. Ironic works after it has
// answered: DataImage is Busy while its worker holds the node, then Attached (bmcsim's CD holds
// the image, as served by Ironic), then, after the detach, empty. An attach that fails in Ironic's
// worker (the image is 404, or is no ISO, which bmcsim's CD refuses) is reported with its reason,
// still after Ironic's power sync has erased last_error, until the next attach, which clears it.
func TestDataImageOnAnActiveNode(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	registerActive(t, p, &host)
	ctx := context.Background()
	cd := func() string {
		c := e.server(t, srv.Name).Cd
		return fmt.Sprintf("inserted %t, image %q", c.Inserted, c.Image)
	}

	// attach asks for url and, with busyAfter, checks that DataImage is busy right after, while
	// Ironic's worker holds the node (the read is one sent after the answer: the write mark keeps
	// older ones out). An attach that fails at once (the image's download answers 404) may have
	// released the node before that read: the outcome is checked once settled.
	attach := func(url string, busyAfter bool) time.Time {
		t.Helper()
		start := time.Now()
		// Ironic may still hold the node for a moment (its power sync, the adoption's last
		// step): the attach is then not taken (working), as for the controller, which asks again.
		poll.Until(t, "Ironic to take the attach of "+url, func() (bool, string) {
			res, err := p.AttachDataImage(ctx, host, url)
			if err != nil || res.Failed() {
				t.Fatalf("attaching %s: %s, %v; want done (taken by Ironic)", url, describe(res), err)
			}
			return !res.Busy, describe(res)
		})
		if st := dataImage(t, p, host); busyAfter && !st.Busy {
			t.Fatalf("DataImage right after the attach of %s: %+v; want busy (Ironic's worker holds the node)", url, st)
		}
		return start
	}

	// A good attach: busy, then attached, and bmcsim's CD holds the image Ironic serves.
	start := attach(e.images.URL+"/live.iso", true)
	st := dataImageSettled(t, p, host, "the attach to end")
	t.Logf("attach of live.iso took %s", time.Since(start).Round(100*time.Millisecond))
	if !st.Attached || st.Error != "" {
		t.Fatalf("after the attach: %+v; want attached, no error", st)
	}
	c := e.server(t, srv.Name).Cd
	if !c.Inserted || !strings.HasPrefix(c.Image, e.ironic.Vars["IRONIC_HTTP_URL"]) || !strings.HasSuffix(c.Image, ".iso") {
		t.Fatalf("bmcsim's CD after the attach: %s; want inserted, an ISO from Ironic's HTTP server %s (image_download_source local)",
			cd(), e.ironic.Vars["IRONIC_HTTP_URL"])
	}
	t.Logf("bmcsim's CD: %s (the URL given was %s)", cd(), e.images.URL+"/live.iso")
	t.Logf("GET vmedia answered: %s", rawVirtualMedia(t, p, host.NodeID))

	// A second attach while the node is locked: Ironic answers 409, which is a wait, not an error.
	// The lock is a conductor's reservation written in the database (nothing else holds the node
	// for long), and the node given is one read before it (the call would not send otherwise).
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, e, fmt.Sprintf(`UPDATE nodes SET reservation = 'c-1' WHERE uuid = '%s'`, host.NodeID))
	res, err := p.changeVirtualMedia(ctx, n, "attach the data image", func() error {
		return nodes.AttachVirtualMedia(ctx, s.sc, n.UUID, nodes.AttachVirtualMediaOpts{DeviceType: nodes.VirtualMediaCD, ImageURL: e.images.URL + "/live.iso"}).ExtractErr()
	})
	execSQL(t, e, fmt.Sprintf(`UPDATE nodes SET reservation = NULL WHERE uuid = '%s'`, host.NodeID))
	if err != nil || !res.Busy || res.RequeueAfter <= 0 || res.Failed() {
		t.Fatalf("attaching while the node is locked: %s, %v; want working, after a short delay", describe(res), err)
	}

	// Detach: busy, then not attached, and bmcsim's CD is empty.
	if res, err := p.DetachDataImage(ctx, host); err != nil || res.Busy || res.Failed() {
		t.Fatalf("detaching: %s, %v; want done", describe(res), err)
	}
	if st := dataImageSettled(t, p, host, "the detach to end"); st.Attached || st.Error != "" {
		t.Fatalf("after the detach: %+v; want not attached, no error", st)
	}
	if c := e.server(t, srv.Name).Cd; c.Inserted || c.Image != "" {
		t.Fatalf("bmcsim's CD after the detach: %s; want empty", cd())
	}

	// Attaches that fail in Ironic's worker: reported with why, never attached.
	var failed string
	for _, bad := range []struct{ path, why string }{
		{"/missing.iso", "404"},                // Ironic's download of the image fails
		{"/disk.img", "not an ISO 9660 image"}, // bmcsim's CD refuses what Ironic serves
	} {
		attach(e.images.URL+bad.path, false)
		st := dataImageSettled(t, p, host, "the attach of "+bad.path+" to fail")
		t.Logf("attach of %s: %+v", bad.path, st)
		if st.Attached || !strings.Contains(st.Error, bad.why) || !strings.HasPrefix(st.Error, "Ironic could not attach") || strings.Contains(st.Error, host.NodeID) {
			t.Fatalf("after attaching %s: %+v; want not attached, an error saying %q, without the node's UUID", bad.path, st, bad.why)
		}
		if c := e.server(t, srv.Name).Cd; c.Inserted {
			t.Fatalf("bmcsim's CD after the failed attach of %s: %s; want empty", bad.path, cd())
		}
		failed = st.Error
	}

	// Ironic's power sync erases last_error within a minute (as here); the failure stays reported,
	// and the operations that read last_error never see it.
	execSQL(t, e, fmt.Sprintf(`UPDATE nodes SET last_error = NULL WHERE uuid = '%s'`, host.NodeID))
	p.watch.Forget(host.NodeID)
	if again := dataImage(t, p, host); again.Error != failed || again.Attached || again.Busy {
		t.Fatalf("once Ironic erased last_error: %+v; want the same failure %q", again, failed)
	}

	// A good attach clears the failure.
	attach(e.images.URL+"/live.iso", false) // Ironic may serve it from its cache at once
	if st := dataImageSettled(t, p, host, "the attach after the failures to end"); !st.Attached || st.Error != "" {
		t.Fatalf("after a good attach following failures: %+v; want attached, no error", st)
	}
	if c := e.server(t, srv.Name).Cd; !c.Inserted {
		t.Fatalf("bmcsim's CD after the good attach: %s; want inserted", cd())
	}
}

// dataImage reads the host's DataImage state, failing the test on an error.
func dataImage(t *testing.T, p *Provisioner, host provisioner.Host) provisioner.DataImageState {
	t.Helper()
	st, err := p.DataImage(context.Background(), host)
	if err != nil {
		t.Fatalf("DataImage: %v", err)
	}
	return st
}

// dataImageSettled reads DataImage until it is no longer busy and returns that state. Reads are
// paced (a read that is not busy makes Ironic ask the BMC, a few hundred milliseconds of its CPU).
func dataImageSettled(t *testing.T, p *Provisioner, host provisioner.Host, what string) provisioner.DataImageState {
	t.Helper()
	var st provisioner.DataImageState
	var last time.Time
	poll.Within(t, 2*time.Minute, what, func() (bool, string) {
		time.Sleep(time.Until(last.Add(250 * time.Millisecond)))
		last = time.Now()
		st = dataImage(t, p, host)
		return !st.Busy, fmt.Sprintf("%+v", st)
	})
	return st
}

// rawVirtualMedia is Ironic's answer to GET /v1/nodes/{id}/vmedia as it came, which must be the
// JSON array DataImage decodes.
func rawVirtualMedia(t *testing.T, p *Provisioner, id string) string {
	t.Helper()
	s, err := p.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.sc.Get(context.Background(), s.sc.ServiceURL("nodes", id, "vmedia"), nil,
		&gophercloud.RequestOpts{OkCodes: []int{200}, KeepResponseBody: true})
	if err != nil {
		t.Fatalf("GET vmedia: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatalf("GET vmedia: %v", err)
	}
	var media []virtualMedia
	if err := json.Unmarshal(raw, &media); err != nil || len(media) == 0 {
		t.Fatalf("GET vmedia answered %s: %v; want a JSON array of virtual media", raw, err)
	}
	return string(raw)
}

// execSQL changes one row of the node in Ironic's database.
func execSQL(t *testing.T, e *testEnv, sql string) {
	t.Helper()
	if n, err := e.ironic.ExecSQL(sql); err != nil || n != 1 {
		t.Fatalf("%s: %d rows, %v", sql, n, err)
	}
}
