package ironicrunner

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/metalforge/metalforge/internal/bmc"
)

// TestEveryBMCTypeIsEnabled: the hardware type and every interface the BMC address schemes ask
// Ironic for are enabled in the ironic.conf the runner writes. Ironic refuses to enroll a node
// that names one that is not (and one its hardware type does not list: the iDRAC types' out-of-band
// inspection is idrac-redfish), so each missing name is a BMC type that can never register.
func TestEveryBMCTypeIsEnabled(t *testing.T) {
	conf := IronicConf(Config{APIPort: 6385, HTTPPort: 6180, DataDir: "/var/lib/ironic", ConfDir: "/etc/ironic"},
		netip.MustParseAddr("192.168.111.10"), false)
	enabled := func(option string) []string {
		m := regexp.MustCompile(`(?m)^` + option + ` = (.*)$`).FindStringSubmatch(conf)
		if m == nil {
			t.Fatalf("ironic.conf has no %s", option)
		}
		return strings.Split(m[1], ",")
	}
	for _, typ := range bmc.Types() {
		address := typ + "://192.0.2.1/redfish/v1/Systems/1"
		if typ == bmc.TypeIPMI || typ == bmc.TypeLibvirt {
			address = typ + "://192.0.2.1"
		}
		a, err := bmc.Parse(address)
		if err != nil {
			t.Fatalf("%s: %v", address, err)
		}
		if !slices.Contains(enabled("enabled_hardware_types"), a.Driver) {
			t.Errorf("%s: hardware type %s not enabled", typ, a.Driver)
		}
		i := a.Interfaces
		for kind, name := range map[string]string{"boot": i.Boot, "bios": i.BIOS, "management": i.Management, "power": i.Power,
			"raid": i.RAID, "vendor": i.Vendor, "firmware": i.Firmware, "inspect": i.Inspect} {
			if name != "" && !slices.Contains(enabled(fmt.Sprintf("enabled_%s_interfaces", kind)), name) {
				t.Errorf("%s: %s interface %s not enabled", typ, kind, name)
			}
		}
	}
}
