package bmc_test

import (
	"errors"
	"fmt"

	"github.com/metalforge/metalforge/internal/bmc"
)

func ExampleParse() {
	a, err := bmc.Parse("redfish-virtualmedia+http://[fd00::5]:8000/redfish/v1/Systems/1")
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Driver, a.Interfaces.Boot, a.SupportsISOPreprovisioningImage, a.RequiresProvisioningNetwork)
	info := a.DriverInfo("admin", "hunter2", true)
	fmt.Println(bmc.RedactDriverInfo(info))

	_, err = bmc.Parse("redfish://admin:hunter2@10.0.0.5/redfish/v1/Systems/1")
	fmt.Println(errors.Is(err, bmc.ErrCredentialsInAddress), err)
	// Output:
	// redfish redfish-virtual-media true false
	// map[redfish_address:http://[fd00::5]:8000 redfish_password:****** redfish_system_id:/redfish/v1/Systems/1 redfish_username:admin redfish_verify_ca:false]
	// true invalid BMC address "<redacted>@10.0.0.5/redfish/v1/Systems/1": user information (a user name or password before the host) is not allowed in a BMC address; put the credentials in the Secret named by credentialsName
}

func ExampleAccess_Validate() {
	a, _ := bmc.Parse("ipmi://10.0.0.5")
	fmt.Println(a.Validate("", bmc.BootModeUEFISecureBoot, false))
	// Output:
	// bootMode: BMC address type "ipmi" does not support secure boot; use bootMode UEFI or legacy, or a Redfish-based BMC address
}
