package ironic

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// DataImage through Ironic's virtual media API, as metal3 does it: attach inserts the image in the
// node's virtual CD (POST /v1/nodes/{id}/vmedia, API 1.89), detach ejects it (DELETE, 1.89), and
// the node reads as attached while any of its virtual media is inserted (GET, 1.93).
//
// Ironic answers an attach or a detach as soon as its conductor has taken the node's lock and
// started a worker (204), so the outcome comes later: the worker holds the lock (reservation)
// while it runs; with the default image_download_source "local" it downloads the image, publishes
// it on its own HTTP server and gives the BMC that URL; a failure is only written to last_error
// ("Could not attach device cdrom to node <uuid>: …", "Could not detach device(s) …") and to the
// node's history. metal3 never looked at it: its attach seemed fine and the host attached again
// and again without a word. Here DataImage reports it. Two things make that last_error hard to
// keep and easy to misread, so every node read sets it aside (setAsideVmediaFailure) into the
// node's memory, where DataImage finds it until the next attach or detach:
//   - Ironic's power sync erases last_error within a minute ("Clearing last_error … after
//     confirmed power state match"), and any other operation's start clears it;
//   - the rest of the provisioner reads last_error as the failure of the node's last power change
//     (decidePowerOn/Off, decideReboot) or of the operation that left it in a failed state
//     (decide*, history.go): a failed attach after a reboot would read as "Reboot failed", and
//     one on a node in deploy failed or error would replace the deployment's reason.

// Ironic's last_error prefixes for a failed attach and detach (conductor/manager.py
// do_attach_virtual_media, detach_virtual_media).
const (
	vmediaAttachFailed = "Could not attach device"
	vmediaDetachFailed = "Could not detach device"
)

// vmediaFailure reports whether a last_error (or history event) is a failed attach or detach.
func vmediaFailure(text string) bool {
	return strings.HasPrefix(text, vmediaAttachFailed) || strings.HasPrefix(text, vmediaDetachFailed)
}

// setAsideVmediaFailure returns n without a last_error that is a failed attach or detach, which it
// remembers for DataImage (see the top of this file). Called on every node getNode returns.
func (p *Provisioner) setAsideVmediaFailure(n *nodes.Node) *nodes.Node {
	if !vmediaFailure(n.LastError) {
		return n
	}
	p.memory.setDataImageFailure(n.UUID, n.LastError)
	c := *n
	c.LastError = ""
	return &c
}

// virtualMedia is one entry of GET /v1/nodes/{id}/vmedia (redfish boot.py _get_vmedia): Ironic 39
// answers a bare JSON array of them.
type virtualMedia struct {
	MediaTypes []string `json:"media_types"`
	Inserted   bool     `json:"inserted"`
	Image      string   `json:"image"`
}

// DataImage reads what the host's virtual CD holds: Busy while a conductor holds the node (an
// attach or detach running, or any other operation), else Attached when any virtual media is
// inserted (metal3's rule), with the failure of the last attach or detach when it failed.
func (p *Provisioner) DataImage(ctx context.Context, host provisioner.Host) (provisioner.DataImageState, error) {
	ctx = withOp(ctx, "dataimage")
	s, n, err := p.dataImageNode(ctx, host, "reading the data image")
	if err != nil {
		return provisioner.DataImageState{}, err
	}
	if n.Reservation != "" {
		// Nothing to read yet, and the GET below talks to the BMC: not worth it.
		return provisioner.DataImageState{Busy: true}, nil
	}
	var media []virtualMedia
	err = nodes.GetVirtualMedia(ctx, s.sc, n.UUID).ExtractInto(&media)
	if notFound(err) {
		return provisioner.DataImageState{}, fmt.Errorf("reading the virtual media of host %s/%s: Ironic node %s is gone: %w",
			host.Namespace, host.Name, n.UUID, provisioner.ErrNeedsRegistration)
	}
	if isStatus(err, http.StatusBadRequest) {
		// The node's driver has no virtual media ("Driver ipmi does not support get_virtual_media").
		return provisioner.DataImageState{}, fmt.Errorf("reading the virtual media of this host: Ironic cannot: %s: %w",
			sanitize(faultOf(err), host.BMCCredentials.Password), provisioner.ErrDataImageUnsupported)
	}
	if err != nil {
		return provisioner.DataImageState{}, classifyError(err, "reading the virtual media of Ironic node "+n.UUID)
	}
	st := provisioner.DataImageState{Attached: dataImageInserted(media, n.UUID)}
	if failure, ok := p.memory.dataImageFailure(n.UUID); ok {
		st.Error = dataImageFailureMessage(failure, n.UUID, host.BMCCredentials.Password)
	}
	return st, nil
}

// dataImageInserted: some virtual media holds an image other than Ironic's own boot ISO for the
// node (boot-<uuid>.iso, the agent's or the instance's ramdisk). metal3 counts any inserted media;
// but with fast track (our default) Ironic leaves the agent's ISO in the CD after inspection or
// cleaning while the agent runs, and an available host's DataImage then read as attached, and
// its deletion ejected the running agent's ISO. Ironic publishes an attached DataImage as
// cdrom-<uuid>.iso; an image the BMC reports without a name (some do not say) is still counted,
// as metal3 does.
func dataImageInserted(media []virtualMedia, nodeUUID string) bool {
	for _, m := range media {
		if !m.Inserted {
			continue
		}
		name := m.Image
		if u, err := url.Parse(m.Image); err == nil {
			name = u.Path
		}
		if path.Base(name) != "boot-"+nodeUUID+".iso" {
			return true
		}
	}
	return false
}

// AttachDataImage asks Ironic to insert the image at url in the host's virtual CD; Done once
// Ironic took the request (DataImage follows it). Ironic downloads the image and serves it to the
// BMC itself (image_download_source "local", its default and metal3's choice).
func (p *Provisioner) AttachDataImage(ctx context.Context, host provisioner.Host, url string) (provisioner.Result, error) {
	ctx = withOp(ctx, "dataimage")
	s, n, err := p.dataImageNode(ctx, host, "attaching the data image")
	if err != nil {
		return provisioner.Result{}, err
	}
	return p.changeVirtualMedia(ctx, n, "attach the data image", func() error {
		return nodes.AttachVirtualMedia(ctx, s.sc, n.UUID, nodes.AttachVirtualMediaOpts{
			DeviceType: nodes.VirtualMediaCD, ImageURL: url,
		}).ExtractErr()
	})
}

// DetachDataImage asks Ironic to eject the host's virtual CD; Done once Ironic took the request.
func (p *Provisioner) DetachDataImage(ctx context.Context, host provisioner.Host) (provisioner.Result, error) {
	ctx = withOp(ctx, "dataimage")
	s, n, err := p.dataImageNode(ctx, host, "detaching the data image")
	if err != nil {
		return provisioner.Result{}, err
	}
	return p.changeVirtualMedia(ctx, n, "detach the data image", func() error {
		return nodes.DetachVirtualMedia(ctx, s.sc, n.UUID, nodes.DetachVirtualMediaOpts{
			DeviceTypes: []nodes.VirtualMediaDeviceType{nodes.VirtualMediaCD},
		}).ExtractErr()
	})
}

// dataImageNode reads the host's node for a DataImage operation, refusing an Ironic whose
// negotiated API cannot read virtual media back (an attach nobody can follow is not started).
func (p *Provisioner) dataImageNode(ctx context.Context, host provisioner.Host, doing string) (*session, *nodes.Node, error) {
	s, err := p.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !s.features.VirtualMedia {
		return nil, nil, fmt.Errorf("%s of host %s/%s: Ironic's API goes up to %s, reading virtual media needs 1.%d (Ironic 26.1, 2024.2 Dalmatian): %w: %w",
			doing, host.Namespace, host.Name, s.features.MaxVersion, minorGetVirtualMedia, ErrIronicTooOld, provisioner.ErrDataImageUnsupported)
	}
	return p.getNode(ctx, host)
}

// changeVirtualMedia sends an attach or detach: Working(short) while the node is locked (409, or
// a reservation already seen: the request would get 409), a failure for a request Ironic refuses
// (400: an unsupported URL scheme, say), Done when accepted, which also forgets the failure of the
// previous attach or detach (Ironic clears last_error as it starts this one).
func (p *Provisioner) changeVirtualMedia(ctx context.Context, n *nodes.Node, what string, send func() error) (provisioner.Result, error) {
	log := p.logger(ctx)
	if n.Reservation != "" {
		log.Info("Ironic node busy, retrying later", "node", n.UUID, "operation", what)
		return p.short(), nil
	}
	log.Info("Asking Ironic to "+what, "node", n.UUID)
	ended := p.watch.Writing(n.UUID) // reads sent before the answer may predate the lock
	err := send()
	ended()
	switch {
	case err == nil:
		p.memory.setDataImageFailure(n.UUID, "")
		return provisioner.Done(), nil
	case busy(err):
		log.Info("Ironic node busy, retrying later", "node", n.UUID, "operation", what, "reason", faultOf(err))
		return p.short(), nil
	case notFound(err):
		return provisioner.Result{}, fmt.Errorf("asking Ironic to %s: node %s is gone: %w", what, n.UUID, provisioner.ErrNeedsRegistration)
	case isStatus(err, http.StatusBadRequest):
		return provisioner.Failed(fmt.Sprintf("Ironic refused to %s: %s", what, faultOf(err))), nil
	}
	return provisioner.Result{}, classifyError(err, fmt.Sprintf("asking Ironic to %s on node %s", what, n.UUID))
}

// nodeMention is how Ironic's vmedia messages name the node ("to node <uuid>", "for node
// <uuid>"): the host's status already says which host it is.
var nodeMention = regexp.MustCompile(`\s+(?:to|for|from|of|on) node [0-9a-fA-F-]{36}\b`)

// dataImageFailureMessage is the status text for a failed attach or detach: Ironic's reason after
// its fixed prefix, without the node's UUID, through the package's sanitizer (request IDs,
// Redfish bodies, the BMC password, credentials in the image URL).
func dataImageFailureMessage(lastError, nodeID, password string) string {
	what := "Ironic could not attach the image to the host's virtual CD"
	if strings.HasPrefix(lastError, vmediaDetachFailed) {
		what = "Ironic could not eject the host's virtual CD"
	}
	reason := lastError
	if _, after, ok := strings.Cut(lastError, ": "); ok {
		reason = after
	}
	reason = nodeMention.ReplaceAllString(reason, "")
	if nodeID != "" {
		reason = strings.ReplaceAll(reason, nodeID, "<node>")
	}
	return sanitize(what+": "+reason, password)
}

// dataImageFailure returns the failed attach or detach remembered for the node (its last_error).
func (m *nodeMemory) dataImageFailure(id string) (lastError string, failed bool) {
	m.read(id, func(f nodeFacts) { lastError = f.dataImageFailure })
	return lastError, lastError != ""
}

// setDataImageFailure remembers a failed attach or detach; "" forgets it (a new one was asked).
func (m *nodeMemory) setDataImageFailure(id, lastError string) {
	m.update(id, func(f *nodeFacts) { f.dataImageFailure = lastError })
}
