package ignition

import (
	"encoding/json"
	"errors"
	"fmt"

	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	"github.com/coreos/ignition/v2/config/util"
	v32 "github.com/coreos/ignition/v2/config/v3_2"
	v33 "github.com/coreos/ignition/v2/config/v3_3"
	v34 "github.com/coreos/ignition/v2/config/v3_4"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/vcontext/report"
)

// ErrInvalidOverride marks an override config that cannot be merged (not Ignition, an
// unsupported spec, or invalid).
var ErrInvalidOverride = errors.New("invalid Ignition override")

// Merge merges override into base with Ignition's merge rules (the override wins where both set
// the same file, unit or user field) and returns the merged config. The result has the newer of
// the two specs; base is Build's output.
func Merge(base, override []byte) ([]byte, error) {
	v, _, err := util.GetConfigVersion(override)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOverride, err)
	}
	if v.Major != 3 || v.PreRelease != "" {
		return nil, fmt.Errorf("%w: spec %s is not supported (3.0 to 3.5)", ErrInvalidOverride, v)
	}
	switch {
	case v.Minor <= 2:
		return merge(v32.ParseCompatibleVersion, v32.Merge, base, override)
	case v.Minor == 3:
		return merge(v33.ParseCompatibleVersion, v33.Merge, base, override)
	case v.Minor == 4:
		return merge(v34.ParseCompatibleVersion, v34.Merge, base, override)
	case v.Minor == 5:
		return merge(v35.ParseCompatibleVersion, v35.Merge, base, override)
	}
	return nil, fmt.Errorf("%w: spec %s is not supported (3.0 to 3.5)", ErrInvalidOverride, v)
}

// merge parses both configs at one spec (translating the older one up) and merges them.
func merge[C any](parse func([]byte) (C, report.Report, error), mergeFn func(C, C) C, base, override []byte) ([]byte, error) {
	b, _, err := parse(base)
	if err != nil {
		return nil, fmt.Errorf("parsing the agent's Ignition config: %w", err)
	}
	o, rpt, err := parse(override)
	if err != nil {
		if errors.Is(err, ignerrors.ErrInvalid) && len(rpt.Entries) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrInvalidOverride, rpt.String())
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidOverride, err)
	}
	out, err := json.Marshal(mergeFn(b, o))
	if err != nil {
		return nil, fmt.Errorf("encoding the merged Ignition config: %w", err)
	}
	return out, nil
}
