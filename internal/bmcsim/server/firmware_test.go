package server

import (
	"net/url"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	tests := map[string]struct {
		image, current, want string
	}{
		"version query wins":           {"http://h/fw/bios-2.0.0.bin?version=3.1-rc1", "1.0.0", "3.1-rc1"},
		"dotted number in the name":    {"http://h/fw/bios-2.1.0.bin", "1.0.0", "2.1.0"},
		"last dotted number":           {"http://h/fw/x11-1.2_bmc-4.20.7.fwpkg", "1.00", "4.20.7"},
		"no version: bump the last":    {"http://h/fw/bmc.bin", "1.09", "1.10"},
		"no version: bump with suffix": {"http://h/fw/nic.img", "20.5.13-b", "20.5.14-b"},
		"no digits at all":             {"http://h/fw/bios.bin", "A", "A.1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(tc.image)
			if err != nil {
				t.Fatal(err)
			}
			if got := versionFrom(u, tc.current); got != tc.want {
				t.Errorf("versionFrom(%s, %s) = %s, want %s", tc.image, tc.current, got, tc.want)
			}
		})
	}
}

func TestComponentFor(t *testing.T) {
	s := &Server{id: "abc"}
	tests := map[string]struct {
		targets []string
		image   string
		want    string
		wantErr bool
	}{
		"inventory target":      {targets: []string{"/redfish/v1/UpdateService/FirmwareInventory/BMC"}, image: "http://h/a.bin", want: ComponentBMC},
		"manager target":        {targets: []string{"/redfish/v1/Managers/abc"}, image: "http://h/a.bin", want: ComponentBMC},
		"system target":         {targets: []string{"/redfish/v1/Systems/abc/"}, image: "http://h/bmc.bin", want: ComponentBIOS},
		"network adapter":       {targets: []string{"/redfish/v1/Chassis/abc/NetworkAdapters/NIC.Slot.1"}, image: "http://h/a.bin", want: ComponentNIC},
		"another server":        {targets: []string{"/redfish/v1/Systems/xyz"}, image: "http://h/a.bin", wantErr: true},
		"unknown component":     {targets: []string{"/redfish/v1/UpdateService/FirmwareInventory/CPLD"}, image: "http://h/a.bin", wantErr: true},
		"bmc from the file":     {image: "http://h/iDRAC-BMC_7.1.bin", want: ComponentBMC},
		"nic from the file":     {image: "http://h/nic-fw-22.1.bin", want: ComponentNIC},
		"anything else is BIOS": {image: "http://h/update-1.2.exe", want: ComponentBIOS},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u, _ := url.Parse(tc.image)
			got, err := s.componentFor(tc.targets, u)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("componentFor(%v, %s) = %q, %v; want %q (error %v)", tc.targets, tc.image, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestDiskNameAndMAC(t *testing.T) {
	for i, want := range map[int]string{0: "/dev/sda", 25: "/dev/sdz", 26: "/dev/sdaa", 27: "/dev/sdab"} {
		if got := diskName(i); got != want {
			t.Errorf("diskName(%d) = %s, want %s", i, got, want)
		}
	}
	if got := MAC("52:54:00", 0x1234, 3); got != "52:54:00:12:34:03" {
		t.Errorf("MAC = %s", got)
	}
}
