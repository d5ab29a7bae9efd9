package bmcsim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Host is one simulated server as a client reaches it.
type Host struct {
	Name     string
	ID       string
	Username string
	Password string
	BootMAC  string
	// SystemPath is /redfish/v1/Systems/<id>.
	SystemPath string
	// Addresses are the BMC address forms the operator takes, keyed by scheme: redfish,
	// redfish+http, redfish-virtualmedia, redfish-virtualmedia+http. The plain forms mean HTTPS.
	Addresses map[string]string
}

// Schemes are the BMC address schemes printed for every host, in order.
var Schemes = []string{"redfish", "redfish+http", "redfish-virtualmedia", "redfish-virtualmedia+http"}

// InventoryEntry is one element of the --inventory file.
type InventoryEntry struct {
	Name           string `json:"name"`
	BMCAddress     string `json:"bmcAddress"`
	Username       string `json:"username"`
	Password       string `json:"password"`
	BootMACAddress string `json:"bootMACAddress"`
}

// Hosts lists every server with its BMC addresses.
func (s *Sim) Hosts() []Host {
	hp := s.hostPort()
	out := make([]Host, 0, len(s.Fleet.Servers))
	for _, srv := range s.Fleet.Servers {
		h := Host{
			Name: srv.Name, ID: srv.ID(), Username: srv.Username, Password: srv.Password, BootMAC: srv.BootMAC(),
			SystemPath: "/redfish/v1/Systems/" + srv.ID(), Addresses: map[string]string{},
		}
		for _, scheme := range Schemes {
			h.Addresses[scheme] = scheme + "://" + hp + h.SystemPath
		}
		out = append(out, h)
	}
	return out
}

// Inventory is what --inventory holds: the redfish-virtualmedia address form, +http unless TLS.
func (s *Sim) Inventory() []InventoryEntry {
	scheme := "redfish-virtualmedia+http"
	if s.opts.TLS {
		scheme = "redfish-virtualmedia"
	}
	hosts := s.Hosts()
	out := make([]InventoryEntry, len(hosts))
	for i, h := range hosts {
		out[i] = InventoryEntry{Name: h.Name, BMCAddress: h.Addresses[scheme], Username: h.Username, Password: h.Password, BootMACAddress: h.BootMAC}
	}
	return out
}

// WriteInventory writes the inventory as a JSON list, atomically, readable only by its owner (it
// holds passwords).
func (s *Sim) WriteInventory(path string) error {
	data, err := json.MarshalIndent(s.Inventory(), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the inventory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the inventory: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the inventory: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the inventory: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the inventory: %w", err)
	}
	return nil
}

// PrintAddresses writes one line per host: the name and its four BMC address forms.
func (s *Sim) PrintAddresses(w io.Writer) error {
	for _, h := range s.Hosts() {
		if _, err := fmt.Fprint(w, h.Name); err != nil {
			return err
		}
		for _, scheme := range Schemes {
			fmt.Fprint(w, " ", h.Addresses[scheme])
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return nil
}
