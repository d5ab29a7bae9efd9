package recipe

import (
	"strings"
	"text/template"
	tparse "text/template/parse"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// FieldsReferencing returns the paths of the templated strings of sr's spec that in selects and
// that name one of the template variables (".ClusterVersion",
// "$.ClusterVersionMajorMinor"...), sorted. Rendering twice with different values only sees
// a dependence the two values happen to tell apart: `{{ if eq .ClusterVersionMajorMinor "4.16" }}`
// renders alike for the current version and any made-up one, and differently for 4.16. A template
// that fails to parse is left to the rendering, which reports it.
func FieldsReferencing(sr *sro.SpecialResource, in func(path string) bool, variables ...string) ([]string, error) {
	tree, err := specTree(sr)
	if err != nil {
		return nil, err
	}
	wanted := map[string]bool{}
	for _, v := range variables {
		wanted[v] = true
	}
	var paths []string
	walkStrings(tree, "spec", func(path, s string) string {
		if !in(path) || !strings.Contains(s, "{{") || notTemplates.MatchString(path) {
			return s
		}
		t, err := template.New(path).Funcs(Funcs()).Parse(s)
		if err == nil && namesField(t.Root, wanted) {
			paths = append(paths, path)
		}
		return s
	})
	return paths, nil
}

// namesField says whether the template tree reads one of the wanted fields, from dot or from $
// (a field read through `with` or a variable of another value counts too: a false alarm costs the
// user a spec.clusterVersion, a miss a wrong preflight verdict).
func namesField(n tparse.Node, wanted map[string]bool) bool {
	switch n := n.(type) {
	case *tparse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if namesField(c, wanted) {
				return true
			}
		}
	case *tparse.ActionNode:
		return namesField(n.Pipe, wanted)
	case *tparse.PipeNode:
		if n == nil {
			return false
		}
		for _, c := range n.Cmds {
			if namesField(c, wanted) {
				return true
			}
		}
	case *tparse.CommandNode:
		for _, a := range n.Args {
			if namesField(a, wanted) {
				return true
			}
		}
	case *tparse.IfNode:
		return namesField(n.Pipe, wanted) || namesField(n.List, wanted) || namesField(n.ElseList, wanted)
	case *tparse.RangeNode:
		return namesField(n.Pipe, wanted) || namesField(n.List, wanted) || namesField(n.ElseList, wanted)
	case *tparse.WithNode:
		return namesField(n.Pipe, wanted) || namesField(n.List, wanted) || namesField(n.ElseList, wanted)
	case *tparse.TemplateNode:
		return namesField(n.Pipe, wanted)
	case *tparse.FieldNode:
		return len(n.Ident) > 0 && wanted[n.Ident[0]]
	case *tparse.VariableNode:
		return len(n.Ident) > 1 && n.Ident[0] == "$" && wanted[n.Ident[1]]
	case *tparse.ChainNode:
		return namesField(n.Node, wanted)
	}
	return false
}
