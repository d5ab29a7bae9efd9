package ironic

import (
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"sigs.k8s.io/yaml"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// configDrive builds the JSON config drive (API 1.56+) that Ironic turns into an ISO: the user data
// as given, network data and meta data parsed from YAML or JSON. Meta data starts from metal3's
// defaults (host name, namespace, an instance UUID) and the user's keys win.
func configDrive(host provisioner.Host, hc provisioner.HostConfig, uuid string) (*nodes.ConfigDrive, error) {
	cd := &nodes.ConfigDrive{}
	if hc.UserData != "" {
		cd.UserData = hc.UserData
	}
	if hc.NetworkData != "" {
		var nd map[string]any
		if err := yaml.Unmarshal([]byte(hc.NetworkData), &nd); err != nil {
			return nil, fmt.Errorf("spec.networkData: the network data is not valid YAML or JSON: %w", err)
		}
		cd.NetworkData = nd
	}
	cd.MetaData = map[string]any{
		"uuid":             uuid,
		"metal3-namespace": host.Namespace,
		"metal3-name":      host.Name,
		"local-hostname":   host.Name,
		"local_hostname":   host.Name,
		"name":             host.Name,
	}
	if hc.MetaData != "" {
		var md map[string]any
		if err := yaml.Unmarshal([]byte(hc.MetaData), &md); err != nil {
			return nil, fmt.Errorf("spec.metaData: the meta data is not valid YAML or JSON: %w", err)
		}
		for k, v := range md {
			cd.MetaData[k] = v
		}
	}
	return cd, nil
}
