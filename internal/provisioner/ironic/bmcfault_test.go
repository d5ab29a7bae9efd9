package ironic

import "testing"

func TestBMCFault(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want bool
	}{
		{"reset answered 500 (seed 32)", "Servicing failed: Node n failed step {'interface': 'bios', 'step': 'apply_configuration'}: Redfish exception occurred. Error: Reboot failed for node n when setting power state to power on. Error: HTTP POST http://127.0.0.1:1/redfish/v1/Systems/s/Actions/ComputerSystem.Reset returned code 500. Base.1.18.InternalError: The request failed", true},
		{"settings PATCH answered 503", "Servicing failed: Redfish BIOS apply configuration failed for node n. Error: HTTP PATCH http://bmc/redfish/v1/Systems/s/Bios/Settings returned code 503. ", true},
		{"no answer", "Servicing failed: Redfish exception occurred. Error: Unable to connect to https://10.0.0.1/redfish/v1/Systems/s. Error: HTTPSConnectionPool(host='10.0.0.1', port=443): Read timed out. (read timeout=60)", true},
		{"BMC refused the value (400)", "Servicing failed: Redfish BIOS apply configuration failed for node n. Error: HTTP PATCH http://bmc/redfish/v1/Systems/s/Bios/Settings returned code 400. Base.1.18.PropertyValueNotInList", false},
		{"credentials refused (401)", "Servicing failed: Redfish connection failed for node n: HTTP GET http://bmc/redfish/v1/Systems/s returned code 401. ", false},
		{"a setting the boot did not apply", "Servicing failed: Redfish BIOS apply_configuration step failed for node n. Attributes {'ProcTurboMode': 'Disabled'} are not updated.", false},
		{"firmware update failed", "Servicing failed: Firmware update failed for node n, firmware http://images/bios.bin. Error: Exception", false},
		{"a code that only starts with 5 (5000)", "Servicing failed: HTTP GET http://bmc returned code 5000. ", false},
		{"a certificate refused", "Servicing failed: Redfish exception occurred. Error: Unable to connect to https://10.0.0.1/redfish/v1. Error: HTTPSConnectionPool(host='10.0.0.1', port=443): Max retries exceeded (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed')))", false},
		{"a proxy that refused", "Servicing failed: Unable to connect to https://10.0.0.1/redfish/v1. Error: HTTPSConnectionPool(host='10.0.0.1', port=443): Max retries exceeded (Caused by ProxyError('Unable to connect to proxy'))", false},
		{"an answer sushy could not follow", "Servicing failed: Unable to connect to https://bmc/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate. Error: HTTP response for POST request to https://bmc/x returned status 202, but no Location header", false},
		{"the BMC's own words in a failed task", "Servicing failed: Firmware update failed for node n, firmware http://images/bios.bin. Error: Unable to connect to the image server", false},
		{"not implemented (501): a refusal", "Servicing failed: HTTP POST http://bmc/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate returned code 501. ", false},
		{"bad gateway (502)", "Servicing failed: HTTP PATCH http://bmc/redfish/v1/Systems/s/Bios/Settings returned code 502. ", true},
		{"no message", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bmcFault(tt.msg); got != tt.want {
				t.Errorf("bmcFault(%q) = %v, want %v", tt.msg, got, tt.want)
			}
		})
	}
}
