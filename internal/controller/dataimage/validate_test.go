package dataimage

import (
	"strings"
	"testing"
)

func TestValidateURL(t *testing.T) {
	cases := []struct {
		url  string
		want string // "" valid, else a part of the message
	}{
		{"http://images.example/config.iso", ""},
		{"https://user:pw@images.example:8443/config.iso?sig=abc", ""},
		{"", "required"},
		{"   ", "required"},
		{"ftp://images.example/config.iso", "scheme must be http or https"},
		{"nfs://server/export/config.iso", "scheme must be http or https"},
		{"images.example/config.iso", "scheme must be http or https"},
		{"http:///config.iso", "no host"},
		{"http://user:pa%zzss@images.example/x.iso", "not a valid URL"},
	}
	for _, c := range cases {
		err := ValidateURL(c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "spec.url: ")):
			t.Errorf("%q: got %v, want a spec.url error saying %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), "pa%zzss"):
			t.Errorf("%q: the error quotes the URL: %v", c.url, err)
		}
	}
}
