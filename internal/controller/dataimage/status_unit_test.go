package dataimage

import (
	"fmt"
	"strings"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestUnansweredMessage: the message of a deletion held by an unanswering provisioner says so and
// why, without the credentials an error may quote.
func TestUnansweredMessage(t *testing.T) {
	err := fmt.Errorf("reading the virtual media of node n1: %w: Ironic at http://ironic:s3cret@ironic.example:6385 answered 503",
		provisioner.ErrUnavailable)
	got := UnansweredMessage(err)
	if !strings.HasPrefix(got, "detaching: the provisioner cannot answer, retrying: reading the virtual media of node n1") ||
		!strings.Contains(got, "answered 503") {
		t.Errorf("message %q does not say why", got)
	}
	if strings.Contains(got, "s3cret") {
		t.Errorf("message %q quotes the password", got)
	}
}

// TestStatusBase: the status write diffs against the DataImage as read, except that a changed
// error entry is diffed against none, so that the patch carries it whole.
func TestStatusBase(t *testing.T) {
	di := func(e *metal3.DataImageError) *metal3.DataImage {
		return &metal3.DataImage{Status: metal3.DataImageStatus{Error: e}}
	}
	failed := &metal3.DataImageError{Count: 2, Message: "detaching: refused"}
	for name, c := range map[string]struct {
		before, after *metal3.DataImage
		whole         bool
	}{
		"unchanged":       {di(failed), di(&metal3.DataImageError{Count: 2, Message: "detaching: refused"}), false},
		"removed":         {di(failed), di(nil), false},
		"none before":     {di(nil), di(failed), true},
		"message changed": {di(failed), di(&metal3.DataImageError{Count: 2, Message: "other"}), true},
		"count changed":   {di(failed), di(&metal3.DataImageError{Count: 3, Message: "detaching: refused"}), true},
	} {
		base := StatusBase(c.before, c.after)
		if whole := base.Status.Error == nil && c.after.Status.Error != nil; whole != c.whole {
			t.Errorf("%s: error written whole %v, want %v", name, whole, c.whole)
		}
		if !c.whole && base != c.before {
			t.Errorf("%s: the base is not the DataImage as read", name)
		}
		if c.whole && c.before.Status.Error == nil && name != "none before" {
			t.Errorf("%s: StatusBase changed the DataImage as read", name)
		}
	}
}
