// Package server is the model of bmcsim's simulated servers: their hardware, power, boot override,
// virtual media, BIOS, storage volumes, firmware and the jobs that complete on the next reset. It
// knows nothing of HTTP; the redfish package renders it and the agent package drives it in band
// (a Server implements agent.Machine).
//
// Every mutation happens under the server's own lock. Side effects that can block — fetching an
// image, starting or stopping the agent — run outside the lock, in order, on a per-server queue.
package server

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// Power states (Redfish PowerState values).
const (
	PowerOn  = "On"
	PowerOff = "Off"
)

// Boot override values (Redfish BootSourceOverrideEnabled / Target / Mode).
const (
	BootDisabled   = "Disabled"
	BootOnce       = "Once"
	BootContinuous = "Continuous"

	TargetNone      = "None"
	TargetPxe       = "Pxe"
	TargetHdd       = "Hdd"
	TargetCd        = "Cd"
	TargetUefiHTTP  = "UefiHttp"
	TargetBiosSetup = "BiosSetup"
)

// Virtual media device ids.
const (
	MediaCd     = "Cd"
	MediaFloppy = "Floppy"
)

// BootTargets are the override targets a server accepts.
var BootTargets = []string{TargetNone, TargetPxe, TargetHdd, TargetCd, TargetUefiHTTP, TargetBiosSetup}

// BootEnabledValues are the accepted BootSourceOverrideEnabled values.
var BootEnabledValues = []string{BootDisabled, BootOnce, BootContinuous}

// BootModes are the accepted BootSourceOverrideMode values.
var BootModes = []string{"UEFI", "Legacy"}

// MediaDevices are the virtual media devices every manager has, in order.
var MediaDevices = []string{MediaCd, MediaFloppy}

// State is everything about a server that changes, and what --state saves.
type State struct {
	Power        string `json:"power"`
	Boot         Boot   `json:"boot"`
	IndicatorLED string `json:"indicatorLED"`
	AssetTag     string `json:"assetTag,omitempty"`
	// Media is keyed by device id (Cd, Floppy).
	Media map[string]Media `json:"media"`
	// BIOS holds the current attribute values that differ from the registry defaults.
	BIOS map[string]any `json:"bios,omitempty"`
	// PendingBIOS holds values written to Bios/Settings, applied on the next boot.
	PendingBIOS       map[string]any `json:"pendingBios,omitempty"`
	Firmware          Versions       `json:"firmware"`
	SecureBoot        bool           `json:"secureBoot"`
	SecureBootCurrent bool           `json:"secureBootCurrent"`
	Volumes           []Volume       `json:"volumes,omitempty"`
	NextVolume        int            `json:"nextVolume"`
	// DiskImage is the image the agent wrote to the root disk ("" when blank).
	DiskImage string `json:"diskImage,omitempty"`
	// DiskWrites counts the images the agent wrote to the root disk over the server's life (a
	// deploy, an install_coreos): a test compares it with the deployments it asked for, to catch a
	// server deployed twice for one request.
	DiskWrites int `json:"diskWrites,omitempty"`
	// BIOSApplies counts the boots that applied pending BIOS settings over the server's life: a
	// test compares it with the live updates it asked for, to catch a change applied twice.
	BIOSApplies int `json:"biosApplies,omitempty"`
	// Booted is what the running server booted from: "" (nothing, or off), Cd, Pxe, UefiHttp (the
	// agent), Hdd (the written OS) or BiosSetup. BootedImage is the ISO URL for Cd and UefiHttp.
	Booted        string         `json:"booted,omitempty"`
	BootedImage   string         `json:"bootedImage,omitempty"`
	Jobs          []Job          `json:"jobs,omitempty"`
	Tasks         []Task         `json:"tasks,omitempty"`
	NextTask      int            `json:"nextTask"`
	Subscriptions []Subscription `json:"subscriptions,omitempty"`
	NextSub       int            `json:"nextSubscription"`
}

// Boot is the boot source override.
type Boot struct {
	Target      string `json:"target"`
	Enabled     string `json:"enabled"`
	Mode        string `json:"mode"`
	HTTPBootURI string `json:"httpBootUri,omitempty"`
}

// Media is one virtual media device.
type Media struct {
	Image          string `json:"image,omitempty"`
	Inserted       bool   `json:"inserted"`
	WriteProtected bool   `json:"writeProtected"`
}

// Versions are the firmware versions.
type Versions struct {
	BIOS string `json:"bios"`
	BMC  string `json:"bmc"`
	NIC  string `json:"nic"`
}

// Volume is a RAID volume on the storage controller.
type Volume struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	RAIDType      string   `json:"raidType"`
	CapacityBytes int64    `json:"capacityBytes"`
	Drives        []string `json:"drives"`
}

// Subscription is a Redfish event subscription.
type Subscription struct {
	ID          string   `json:"id"`
	Destination string   `json:"destination"`
	Context     string   `json:"context,omitempty"`
	Protocol    string   `json:"protocol"`
	EventTypes  []string `json:"eventTypes,omitempty"`
	// HeaderNames are the names of the HTTP headers the subscription was given (their values,
	// tokens, are not kept: Redfish never reads them back, and tests need only see they came).
	HeaderNames []string `json:"headerNames,omitempty"`
}

func (st *State) clone() State {
	c := *st
	c.Media = maps.Clone(st.Media)
	c.BIOS = maps.Clone(st.BIOS)
	c.PendingBIOS = maps.Clone(st.PendingBIOS)
	c.Volumes = slices.Clone(st.Volumes)
	for i := range c.Volumes {
		c.Volumes[i].Drives = slices.Clone(c.Volumes[i].Drives)
	}
	c.Jobs = slices.Clone(st.Jobs)
	c.Tasks = slices.Clone(st.Tasks)
	for i := range c.Tasks {
		c.Tasks[i].Messages = slices.Clone(c.Tasks[i].Messages)
	}
	c.Subscriptions = slices.Clone(st.Subscriptions)
	return c
}

// Server is one simulated server with its BMC.
type Server struct {
	Index    int
	Name     string
	id       string // Redfish system, manager and chassis id (the UUID)
	Username string
	Password string
	HW       *Hardware

	fleet *Fleet

	mu  sync.Mutex
	st  State
	gen uint64 // bumped on every power transition; stale boot work checks it

	// The run queue serialises agent Boot/Stop calls (see power.go).
	qmu          sync.Mutex
	queue        []runOp
	qrunning     bool
	agentRunning bool   // only touched by the queue worker
	agentGen     uint64 // the power cycle the running agent booted in; only touched by the queue worker
}

var _ agent.Machine = (*Server)(nil)

func newServer(f *Fleet, index int, name string) *Server {
	p := &f.cfg.Profile
	s := &Server{
		Index:    index,
		Name:     name,
		Username: name,
		Password: password(f.cfg.Secret, name),
		HW:       newHardware(p, name, index),
		fleet:    f,
	}
	s.id = s.HW.UUID
	s.st = initialState(p)
	return s
}

func initialState(p *config.Profile) State {
	st := State{
		Power:        PowerOff,
		Boot:         Boot{Target: TargetNone, Enabled: BootDisabled, Mode: p.BootMode},
		IndicatorLED: "Off",
		Media:        map[string]Media{},
		Firmware:     Versions{BIOS: p.Firmware.BIOS, BMC: p.Firmware.BMC, NIC: p.Firmware.NIC},
		NextVolume:   1,
		NextTask:     1,
		NextSub:      1,
	}
	for _, d := range MediaDevices {
		st.Media[d] = Media{WriteProtected: true}
	}
	return st
}

// View runs fn with the server's state under its lock. fn must not block or keep st.
func (s *Server) View(fn func(st *State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.st)
}

// Snapshot returns a deep copy of the state.
func (s *Server) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.clone()
}

// update runs fn under the lock and records a change for persistence when fn reports one.
func (s *Server) update(fn func(st *State) bool) {
	s.mu.Lock()
	changed := fn(&s.st)
	s.mu.Unlock()
	if changed {
		s.fleet.markDirty()
	}
}

// Precondition is checked under the server's lock just before a change applies; when it fails
// the change fails with ErrPrecondition. The Redfish layer checks If-Match with it: checked under
// the same lock as the change, two PATCHes sent with the same ETag cannot both apply.
type Precondition func(st *State) bool

// updateIf runs fn under the lock once pre (nil: none) accepts the state, and records a change for
// persistence when fn reports one.
func (s *Server) updateIf(pre Precondition, fn func(st *State) (changed bool, err error)) error {
	s.mu.Lock()
	if pre != nil && !pre(&s.st) {
		s.mu.Unlock()
		return ErrPrecondition
	}
	changed, err := fn(&s.st)
	s.mu.Unlock()
	if changed {
		s.fleet.markDirty()
	}
	return err
}

func (s *Server) now() time.Time { return s.fleet.now() }
