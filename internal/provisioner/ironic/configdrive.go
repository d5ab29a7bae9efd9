package ironic

import (
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// configDrive builds the JSON config drive (API 1.56+) that Ironic turns into an ISO: the user data
// as given, network data and meta data parsed from YAML or JSON (provisioner.ParseConfigData, with
// which the host controller checked them before provisioning). Meta data starts from metal3's
// defaults (host name, namespace, the host's UID as instance UUID) and the user's keys win. The
// UUID is the BareMetalHost's, as metal3 writes it, not the node's: CAPM3 clusters label their
// Nodes metal3.io/uuid={{ ds.meta_data.uuid }} and match them to the host by it (a node's UUID
// changes when the node is enrolled again, too). nodeUUID serves only a host without one.
func configDrive(host provisioner.Host, hc provisioner.HostConfig, nodeUUID string) (*nodes.ConfigDrive, error) {
	uuid := host.UID
	if uuid == "" {
		uuid = nodeUUID
	}
	cd := &nodes.ConfigDrive{}
	if hc.UserData != "" {
		cd.UserData = hc.UserData
	}
	nd, err := provisioner.ParseConfigData(hc.NetworkData)
	if err != nil {
		return nil, fmt.Errorf("spec.networkData: %w", err)
	}
	if nd != nil {
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
	md, err := provisioner.ParseConfigData(hc.MetaData)
	if err != nil {
		return nil, fmt.Errorf("spec.metaData: %w", err)
	}
	for k, v := range md {
		cd.MetaData[k] = v
	}
	return cd, nil
}
