package image

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/cli/cli/config/types"
)

// The registry that a name without one (or with docker.io) pulls from, under the names the
// kubelet gives it: images are matched as docker.io/<repo>, and a key for index.docker.io is
// Docker Hub's (docker login writes https://index.docker.io/v1/).
const (
	dockerHub      = "docker.io"
	dockerHubIndex = "index.docker.io"
)

// credentialsFor picks the entry of a pull Secret's docker config that the kubelet would use to
// pull repo ("host[:port]/path", as go-containerregistry names a repository). The kubelet pulls
// the driver image with this Secret, so the lookup must agree with it, not with a stricter
// exact-host match: a key may carry a scheme ("https://quay.io"), an API suffix
// ("registry.example.com/v2/"), a repository path ("quay.io/vendor", the most specific key
// wins) or a wildcard host ("*.registry.example.com"); Docker Hub is docker.io or
// index.docker.io. Several keys may match; as the kubelet tries the most specific first, so
// does this (it tries the others only when a pull fails, which a lookup cannot tell apart from
// an absent image).
func credentialsFor(auths map[string]types.AuthConfig, repo string) (types.AuthConfig, bool) {
	if rest, ok := strings.CutPrefix(repo, dockerHubIndex+"/"); ok {
		repo = dockerHub + "/" + rest
	}
	target, err := schemeless(repo)
	if err != nil {
		return types.AuthConfig{}, false
	}
	// Keys that name the same place ("quay.io", "https://quay.io/v2/"): the one written in the
	// normalised form wins, else the first in order, so that the choice does not depend on
	// map order.
	byKey, from := map[string]types.AuthConfig{}, map[string]string{}
	for raw, ac := range auths {
		k, ok := keyringKey(raw)
		if !ok {
			continue
		}
		if prev, dup := from[k]; dup && (prev == k || (raw != k && prev < raw)) {
			continue
		}
		byKey[k], from[k] = ac, raw
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	// Reverse order puts quay.io/vendor before quay.io: the longer path is tried first.
	slices.Sort(keys)
	slices.Reverse(keys)
	for _, k := range keys {
		glob, err := schemeless(k)
		if err == nil && urlsMatch(glob, target) {
			return byKey[k], true
		}
	}
	if strings.HasPrefix(repo, dockerHub+"/") {
		ac, ok := byKey[dockerHubIndex]
		return ac, ok
	}
	return types.AuthConfig{}, false
}

// keyringKey normalises a docker config key as the kubelet does: no scheme, and /v1/ or /v2/
// (the registry API's path, which old docker clients wrote) stands for the host itself.
func keyringKey(raw string) (string, bool) {
	value := raw
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil || u.Host == "" {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

func schemeless(s string) (*url.URL, error) {
	u, err := url.Parse("https://" + s)
	if err != nil {
		return nil, err
	}
	u.Scheme = ""
	return u, nil
}

// urlsMatch: same port, same number of host labels each matching the glob's (a label may be a
// wildcard: *.example.com), and the target's path under the glob's.
func urlsMatch(glob, target *url.URL) bool {
	if glob.Port() != target.Port() || !strings.HasPrefix(target.Path, glob.Path) {
		return false
	}
	globParts, targetParts := strings.Split(glob.Hostname(), "."), strings.Split(target.Hostname(), ".")
	if len(globParts) != len(targetParts) {
		return false
	}
	for i, g := range globParts {
		if ok, err := filepath.Match(g, targetParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}
