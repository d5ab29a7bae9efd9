package ironic

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/metalforge/metalforge/internal/statustext"
)

// Environment variables, named as metal3 names them.
const (
	EnvEndpoint          = "IRONIC_ENDPOINT"
	EnvCACertFile        = "IRONIC_CACERT_FILE"
	EnvInsecure          = "IRONIC_INSECURE"
	EnvAuthRootDir       = "METAL3_AUTH_ROOT_DIR"
	EnvClientTimeout     = "IRONIC_CLIENT_TIMEOUT"
	EnvDeployKernelURL   = "DEPLOY_KERNEL_URL"
	EnvDeployRamdiskURL  = "DEPLOY_RAMDISK_URL"
	EnvDeployISOURL      = "DEPLOY_ISO_URL"
	EnvProvisioningLimit = "PROVISIONING_LIMIT"
	EnvLiveISOPersistent = "LIVE_ISO_FORCE_PERSISTENT_BOOT_DEVICE"
)

// Defaults, as metal3's.
const (
	DefaultClientTimeout     = 30 * time.Second
	DefaultMaxConnections    = 10 // Ironic's embedded API server's threads
	DefaultProvisioningLimit = 20
	DefaultShortDelay        = 3 * time.Second
	DefaultLongDelay         = 10 * time.Second
	DefaultJitter            = 0.25
	DefaultSoftPowerOff      = 180 * time.Second
	DefaultCapacityCacheTTL  = 5 * time.Second
	DefaultNodeCacheTTL      = time.Second
	DefaultAgentLostAfter    = 5 * time.Minute // Ironic's [api] ramdisk_heartbeat_timeout
	DefaultStalledNodeAfter  = 10 * time.Minute
)

// defaultAuthRootDir is where metal3's deployments mount the Ironic credentials.
const defaultAuthRootDir = "/opt/metal3/auth"

// Config is everything the Ironic provisioner needs. ConfigFromEnv fills it from metal3's
// environment variables; flags may override fields afterwards.
type Config struct {
	// Endpoint is Ironic's versioned API URL, e.g. http://127.0.0.1:6385/v1/.
	Endpoint string
	// CACertFile is a PEM bundle that verifies Ironic's certificate ("" uses the system roots).
	CACertFile string
	// Insecure skips verification of Ironic's certificate.
	Insecure bool
	// Username and Password are Ironic's HTTP basic credentials; both empty means noauth.
	Username string
	Password string
	// ClientTimeout bounds each request to Ironic.
	ClientTimeout time.Duration
	// MaxConnections caps the connections to Ironic, and so the requests in flight at once.
	MaxConnections int

	// DeployKernelURL, DeployRamdiskURL and DeployISOURL are the agent (deploy) images used when
	// a host has no PreprovisioningImage. The ISO is used only by BMCs that boot ISOs (virtual
	// media, UEFI HTTP).
	DeployKernelURL  string
	DeployRamdiskURL string
	DeployISOURL     string
	// PreprovisioningImageBuilder: an image builder makes per-host agent images
	// (--build-preprov-image); the global deploy images then only serve as the kernel paired
	// with an initrd.
	PreprovisioningImageBuilder bool
	// LiveISOForcePersistentBootDevice is driver_info/force_persistent_boot_device for live ISOs
	// (Default, Always or Never; "" means Default).
	LiveISOForcePersistentBootDevice string

	// ProvisioningLimit caps the nodes busy at once (inspecting, cleaning, deploying, deleting),
	// not counting virtual-media nodes.
	ProvisioningLimit int
	// CapacityCacheTTL is how long a count of busy nodes is reused.
	CapacityCacheTTL time.Duration
	// NodeCacheTTL is how long a node read is reused by the next read-only call for the same
	// node (e.g. Adopt then PowerState in one reconcile); any write forgets it. 0 disables.
	NodeCacheTTL time.Duration

	// ShortDelay and LongDelay are the requeue delays for quick (manage, provide, power, busy) and
	// long (inspect, clean, deploy, service) operations; Jitter adds up to that fraction more.
	ShortDelay time.Duration
	LongDelay  time.Duration
	Jitter     float64
	// SoftPowerOffTimeout is how long Ironic waits for a soft power off before it fails.
	SoftPowerOffTimeout time.Duration
	// AgentLostAfter: a node waiting for an agent that took its token and has not heartbeat for
	// this long is aborted, and the operation retried (lostagent.go). 0 leaves such a node to
	// Ironic's callback timeout.
	AgentLostAfter time.Duration
	// StalledNodeAfter: a node left in a working state with no conductor holding it for this long
	// is deleted and the host registered again (stall.go). 0 only reports such a node on the
	// host.
	StalledNodeAfter time.Duration
}

// String never shows the password, nor credentials in the URLs.
func (c Config) String() string {
	auth := "noauth"
	if c.Username != "" {
		auth = "http_basic user " + c.Username
	}
	r := statustext.Redact
	return fmt.Sprintf("ironic %s (%s, timeout %s), deploy kernel %q ramdisk %q iso %q, provisioning limit %d",
		r(c.Endpoint), auth, c.ClientTimeout, r(c.DeployKernelURL), r(c.DeployRamdiskURL), r(c.DeployISOURL), c.ProvisioningLimit)
}

// DefaultConfig is a Config with every default set and no endpoint.
func DefaultConfig() Config {
	return Config{
		ClientTimeout:       DefaultClientTimeout,
		MaxConnections:      DefaultMaxConnections,
		ProvisioningLimit:   DefaultProvisioningLimit,
		CapacityCacheTTL:    DefaultCapacityCacheTTL,
		NodeCacheTTL:        DefaultNodeCacheTTL,
		ShortDelay:          DefaultShortDelay,
		LongDelay:           DefaultLongDelay,
		Jitter:              DefaultJitter,
		SoftPowerOffTimeout: DefaultSoftPowerOff,
		AgentLostAfter:      DefaultAgentLostAfter,
		StalledNodeAfter:    DefaultStalledNodeAfter,
	}
}

// ConfigFromEnv reads metal3's environment variables. Malformed values are errors naming the
// variable; IRONIC_ENDPOINT is required. withFlags sets what the operator's flags decide before
// the result is checked (with an image builder, DEPLOY_KERNEL_URL alone is complete).
func ConfigFromEnv(withFlags ...func(*Config)) (Config, error) {
	return configFrom(os.Getenv, withFlags...)
}

func configFrom(getenv func(string) string, withFlags ...func(*Config)) (Config, error) {
	c := DefaultConfig()
	for _, f := range withFlags {
		f(&c)
	}
	var errs []error
	bad := func(name, value, why string) {
		errs = append(errs, fmt.Errorf("%s=%q: %s", name, value, why))
	}

	c.Endpoint = strings.TrimSpace(getenv(EnvEndpoint))
	c.CACertFile = getenv(EnvCACertFile)
	c.DeployKernelURL = getenv(EnvDeployKernelURL)
	c.DeployRamdiskURL = getenv(EnvDeployRamdiskURL)
	c.DeployISOURL = getenv(EnvDeployISOURL)
	c.LiveISOForcePersistentBootDevice = getenv(EnvLiveISOPersistent)

	if v := getenv(EnvInsecure); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(EnvInsecure, v, "want true or false")
		}
		c.Insecure = b
	}
	if v := getenv(EnvClientTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(EnvClientTimeout, v, "want a positive duration such as 30s")
		}
		c.ClientTimeout = d
	}
	if v := getenv(EnvProvisioningLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			bad(EnvProvisioningLimit, v, "want a positive integer")
		}
		c.ProvisioningLimit = n
	}

	root := getenv(EnvAuthRootDir)
	if root == "" {
		root = defaultAuthRootDir
	}
	user, pass, err := readBasicAuth(filepath.Join(root, "ironic"))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s=%q: %w", EnvAuthRootDir, root, err))
	}
	c.Username, c.Password = user, pass

	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// readBasicAuth reads <dir>/username and <dir>/password. A missing directory or neither file means
// noauth (as in metal3); one file without the other is an error.
func readBasicAuth(dir string) (string, string, error) {
	if _, err := os.Stat(dir); err != nil {
		if os.IsNotExist(err) {
			return "", "", nil
		}
		return "", "", fmt.Errorf("reading Ironic credentials: %w", err)
	}
	read := func(name string) (string, bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("reading Ironic credentials file %s: %w", name, err)
		}
		return strings.TrimSpace(string(b)), true, nil
	}
	user, hasUser, err := read("username")
	if err != nil {
		return "", "", err
	}
	pass, hasPass, err := read("password")
	if err != nil {
		return "", "", err
	}
	switch {
	case !hasUser && !hasPass:
		return "", "", nil
	case !hasUser || !hasPass || user == "" || pass == "":
		return "", "", fmt.Errorf("ironic/username and ironic/password must both be present and non-empty")
	}
	return user, pass, nil
}

// Validate checks the fields a caller may have set by hand (flags).
func (c Config) Validate() error {
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, fmt.Errorf("%s is required (Ironic's API URL, e.g. http://127.0.0.1:6385/v1/)", EnvEndpoint))
	} else if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s=%q: want an http(s) URL", EnvEndpoint, c.Endpoint))
	}
	for name, v := range map[string]string{
		EnvDeployKernelURL: c.DeployKernelURL, EnvDeployRamdiskURL: c.DeployRamdiskURL, EnvDeployISOURL: c.DeployISOURL,
	} {
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || u.Scheme == "" {
			errs = append(errs, fmt.Errorf("%s=%q: want a URL", name, v))
		}
	}
	if (c.DeployKernelURL == "") != (c.DeployRamdiskURL == "") && !c.PreprovisioningImageBuilder {
		errs = append(errs, fmt.Errorf("%s and %s go together: set both or neither", EnvDeployKernelURL, EnvDeployRamdiskURL))
	}
	switch c.LiveISOForcePersistentBootDevice {
	case "", "Default", "Always", "Never":
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want Default, Always or Never", EnvLiveISOPersistent, c.LiveISOForcePersistentBootDevice))
	}
	if c.CACertFile != "" {
		if _, err := os.Stat(c.CACertFile); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", EnvCACertFile, c.CACertFile, err))
		}
	}
	if c.ClientTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", EnvClientTimeout))
	}
	if c.MaxConnections <= 0 {
		errs = append(errs, errors.New("the maximum number of connections to Ironic must be positive"))
	}
	if c.ProvisioningLimit <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", EnvProvisioningLimit))
	}
	if c.Jitter < 0 {
		errs = append(errs, errors.New("jitter must not be negative"))
	}
	return errors.Join(errs...)
}
