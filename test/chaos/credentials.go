package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The credential search looks for the actual values — every BMC password (the changed one too),
// the Ironic credentials and every value of every Secret in the namespace — in the status of every
// object the API server serves, in every Event, and in the operator's log. Statuses and Events are
// read at the end of each step (hosts and their HardwareData are gone at the end, and Events
// expire after an hour), the log at the end.

type searchStats struct {
	rounds, objects, events int
	logBytes                int64
}

// needle is a value to look for.
type needle struct {
	what string
	re   *regexp.Regexp
	// secret says whether finding it is a leak: a password or a Secret's value that is not a user
	// name (user names are reported, not counted).
	secret bool
}

// needles are the values to look for now.
func (cp *campaign) needles(ctx context.Context) []needle {
	cp.mu.Lock()
	values := map[string]string{}
	for v, what := range cp.passwords {
		values[v] = what
	}
	cp.mu.Unlock()
	var secrets corev1.SecretList
	if err := cp.c.List(ctx, &secrets, client.InNamespace(namespace)); err == nil {
		for _, s := range secrets.Items {
			for k, v := range s.Data {
				if _, known := values[string(v)]; !known {
					values[string(v)] = fmt.Sprintf("the %s of Secret %s", k, s.Name)
				}
			}
		}
	}
	users := map[string]string{cp.ironicUser: "the Ironic user name"}
	for _, h := range cp.sim.Hosts() {
		users[h.Username] = "the BMC user name of " + h.Name
	}
	var out []needle
	for v, what := range values {
		if len(v) < 8 {
			continue // too short to tell from other text
		}
		_, isUser := users[v]
		out = append(out, needle{what: what, re: regexp.MustCompile(regexp.QuoteMeta(v)), secret: !isUser})
	}
	for v, what := range users {
		if _, done := values[v]; !done {
			// User names like srv-1 are prefixes of others (srv-10): match whole words only.
			out = append(out, needle{what: what, re: regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`)})
		}
	}
	slices.SortFunc(out, func(a, b needle) int { return strings.Compare(a.what, b.what) })
	return out
}

// found records a value found somewhere (once per value and place).
func (cp *campaign) found(n needle, where string) {
	line := fmt.Sprintf("%s found in %s", n.what, where)
	if !n.secret {
		line = "(user name, not counted) " + line
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if !slices.Contains(cp.leaks, line) {
		cp.leaks = append(cp.leaks, line)
		fmt.Println("  CREDENTIAL:", line)
	}
}

// searchStatuses reads the status of every object the API server serves (cluster-wide kinds and
// the campaign's namespace) and every Event, and looks for the values.
func (cp *campaign) searchStatuses(ctx context.Context, when string) {
	needles := cp.needles(ctx)
	// Listing every kind reads deprecated ones too (ComponentStatus, Endpoints): no warnings.
	cfg := rest.CopyConfig(cp.kube.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		cp.logf("credential search: %v", err)
		return
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		cp.logf("credential search: %v", err)
		return
	}
	// A partial answer (an aggregated API down) still lists the rest.
	lists, _ := disc.ServerPreferredResources()
	objects, events := 0, 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "secrets" {
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name))
			var ri dynamic.ResourceInterface = res
			if r.Namespaced {
				ri = res.Namespace(namespace)
			}
			items, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, it := range items.Items {
				part := it.Object["status"]
				where := fmt.Sprintf("the status of %s %s", r.Kind, it.GetName())
				if r.Name == "events" {
					// An Event is all text meant for people: every field counts.
					part, where = it.Object, fmt.Sprintf("Event %s (%v)", it.GetName(), it.Object["reason"])
					events++
				} else {
					objects++
				}
				if part == nil {
					continue
				}
				text, _ := json.Marshal(part)
				for _, n := range needles {
					if n.re.Match(text) {
						cp.found(n, where+", "+when)
					}
				}
			}
		}
	}
	cp.mu.Lock()
	cp.searched.rounds++
	cp.searched.objects += objects
	cp.searched.events += events
	cp.mu.Unlock()
}

// searchLog looks for the values in the operator's log (every process's, appended).
func (cp *campaign) searchLog(ctx context.Context) {
	needles := cp.needles(ctx)
	b, err := os.ReadFile(cp.op.LogPath())
	if err != nil {
		cp.logf("credential search: %v", err)
		return
	}
	cp.mu.Lock()
	cp.searched.logBytes = int64(len(b))
	cp.mu.Unlock()
	for _, n := range needles {
		if loc := n.re.FindIndex(b); loc != nil {
			line := 1 + strings.Count(string(b[:loc[0]]), "\n")
			cp.found(n, fmt.Sprintf("the operator's log (line %d)", line))
		}
	}
}
