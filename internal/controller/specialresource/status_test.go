package specialresource

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestStatusTransition: setStatus reports a transition (an event) when the outcome's condition
// was not True, when its reason changed, and when an Errored condition's message changed (a new
// problem of the same reason); not when a reconcile says again what the status says, nor when only
// a Progressing or Ready message moved on.
func TestStatusTransition(t *testing.T) {
	notFound := errored(sro.ReasonRecipeFailure, "spec.recipe.configMap: ConfigMap ns/r not found", time.Second)
	tmplErr := errored(sro.ReasonRecipeFailure, "ConfigMap ns/r: template: 1000-x.yaml:1: unexpected EOF", time.Second)
	badSecret := errored(sro.ReasonInvalidSpec, "spec.driverContainer.pullSecret: pull Secret ns/s: not a valid docker config", time.Second)
	waitA := progressing(sro.ReasonWaitingForImage, "kernel a: the registry could not be asked: HTTP 503", "", time.Second)
	waitB := progressing(sro.ReasonWaitingForImage, "kernel b: the registry could not be asked: HTTP 503", "", time.Second)
	for name, tc := range map[string]struct {
		before []outcome // earlier reconciles, in order
		out    outcome
		want   string
	}{
		"first outcome":                     {out: notFound, want: sro.ConditionErrored},
		"same Errored message again":        {before: []outcome{notFound}, out: notFound, want: ""},
		"Errored, same reason, new message": {before: []outcome{notFound}, out: tmplErr, want: sro.ConditionErrored},
		"Errored, another reason":           {before: []outcome{tmplErr}, out: badSecret, want: sro.ConditionErrored},
		"back to the first message":         {before: []outcome{notFound, tmplErr}, out: notFound, want: sro.ConditionErrored},
		"Errored to Progressing":            {before: []outcome{badSecret}, out: waitA, want: sro.ConditionProgressing},
		"Progressing, new message":          {before: []outcome{waitA}, out: waitB, want: ""},
		"Ready again":                       {before: []outcome{ready()}, out: ready(), want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "sr", Generation: 1}}
			now := metav1.NewTime(time.Unix(1700000000, 0))
			for _, b := range tc.before {
				setStatus(sr, &scope{}, b, now)
			}
			if got := setStatus(sr, &scope{}, tc.out, now); got != tc.want {
				t.Errorf("transition %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRecipeConfigMaps: the index names every recipe ConfigMap a SpecialResource reads, its own
// and its dependencies', once each.
func TestRecipeConfigMaps(t *testing.T) {
	cm := func(ns, name string) *sro.SpecialResourceRecipe {
		return &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: ns, Name: name}}
	}
	for name, tc := range map[string]struct {
		spec sro.SpecialResourceSpec
		want []string
	}{
		"built-in, no dependencies": {want: nil},
		"own":                       {spec: sro.SpecialResourceSpec{Recipe: *cm("ns", "own")}, want: []string{"ns/own"}},
		"own and dependencies'": {spec: sro.SpecialResourceSpec{Recipe: *cm("ns", "own"), DependsOn: []sro.SpecialResourceDependency{
			{Name: "a", Recipe: cm("dep", "a")}, {Name: "b"}, {Name: "c", Recipe: &sro.SpecialResourceRecipe{Name: sro.DriverContainerRecipe}},
			{Name: "d", Recipe: cm("ns", "own")}}},
			want: []string{"dep/a", "ns/own"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := recipeConfigMaps(&sro.SpecialResource{Spec: tc.spec})
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}
