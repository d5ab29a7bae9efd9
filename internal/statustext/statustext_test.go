package statustext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"user and password", `Validation of image href https://admin:s3cret@mirror.example/os.qcow2 failed`,
			`Validation of image href https://***@mirror.example/os.qcow2 failed`},
		{"token only", `ftp://tok@fw.example/bmc.bin`, `ftp://***@fw.example/bmc.bin`},
		{"two URLs", `http://a:b@x/1 and http://c:d@y/2`, `http://***@x/1 and http://***@y/2`},
		{"an @ in the path is not user information", `https://mirror.example/users/@me/os.img`, `https://mirror.example/users/@me/os.img`},
		{"an e-mail address is left alone", `ask admin@example.com`, `ask admin@example.com`},
		{"pre-signed URL", `GET https://s3.example/b/os.img?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc123&X-Amz-Expires=60: 403`,
			`GET https://s3.example/b/os.img?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60: 403`},
		{"SAS and access token", `https://blob.example/os.img?sv=2024&sig=Zm9v&access_token=eyJ`, `https://blob.example/os.img?sv=2024&sig=***&access_token=***`},
		{"a checksum parameter is kept", `https://mirror.example/rhcos.qcow2.gz?sha256=0123abcd`, `https://mirror.example/rhcos.qcow2.gz?sha256=0123abcd`},
		{"quoted URL", `"https://mirror.example/x?token=abc" failed`, `"https://mirror.example/x?token=***" failed`},
		{"an @ in the password", `https://admin:p@ssw0rd@mirror/os.img`, `https://***@mirror/os.img`},
		{"a / in the password", `parse "https://user:pa/ss@mirror/img.qcow2": invalid port ":pa" after host`,
			`parse "https://***@mirror/img.qcow2": invalid port ":pa" after host`},
		{"a # and a ? in the password", `https://user:a#b?c@mirror/img`, `https://***@mirror/img`},
		{"a port and an @ in the path: a host", `https://registry.example:8443/v2/x@v1`, `https://registry.example:8443/v2/x@v1`},
		{"a password of digits and a slash: not a port", `https://user:123/abc@mirror/img`, `https://***@mirror/img`},
		{"a mirror registry's digest reference", `oci://mirror.example.com:8443/ocp/rhcos@sha256:abcd`, `oci://mirror.example.com:8443/ocp/rhcos@sha256:abcd`},
		{"an IPv6 host", `http://[fe80::1]:8080/x@y`, `http://[fe80::1]:8080/x@y`},
		{"JSON after a URL with a port", `{"image_source":"http://h:8080/x","owner":"a@b.c"}`, `{"image_source":"http://h:8080/x","owner":"a@b.c"}`},
		{"a password starting with digits but no path", `https://user:1234@mirror/img`, `https://***@mirror/img`},
		{"an image digest is left alone", `docker://quay.io/x@sha256:abc`, `docker://quay.io/x@sha256:abc`},
		{"API keys and passes", `https://h/x?key=AIzaSECRET&pass=hunter2&api-key=abc&pwd=x&n=1`, `https://h/x?key=***&pass=***&api-key=***&pwd=***&n=1`},
		{"nothing to do", `spec.settings: unknown setting "Foo"`, `spec.settings: unknown setting "Foo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in); got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestClean(t *testing.T) {
	if got := Clean("line one\n\tline   two  https://u:p@h/x ", 0); got != "line one line two https://***@h/x" {
		t.Errorf("Clean: got %q", got)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	got := Clean(long, EventNoteLimit)
	if len(got) > EventNoteLimit {
		t.Errorf("Clean to %d bytes gave %d bytes", EventNoteLimit, len(got))
	}
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Clean cut inside a character or without an ellipsis: %q", got[len(got)-8:])
	}
	if len(got) < EventNoteLimit-4 {
		t.Errorf("Clean cut more than needed: %d bytes", len(got))
	}
	// The redaction happens before the cut: a credential straddling the limit is not half kept.
	msg := strings.Repeat("x", 1000) + " https://user:verylongpassword@h/"
	if got := Clean(msg, EventNoteLimit); strings.Contains(got, "verylong") || strings.Contains(got, "user") {
		t.Errorf("Clean kept part of a credential: %q", got[990:])
	}
}

// Invalid UTF-8 is replaced before the cut: encoded as JSON, each invalid byte would become a
// 3-byte U+FFFD and the note would exceed the API server's limit.
func TestCleanInvalidUTF8(t *testing.T) {
	got := Clean(strings.Repeat("a\xff", 700), EventNoteLimit)
	if !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 kept: %q", got[:16])
	}
	encoded, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var decoded string
	if err := json.Unmarshal(encoded, &decoded); err != nil || len(decoded) > EventNoteLimit {
		t.Errorf("after a JSON round trip the note is %d bytes (%v)", len(decoded), err)
	}
}

func TestCap(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven …"},
		{"no limit", 0, "no limit"},
	} {
		if got := Cap(tc.in, tc.limit); got != tc.want || (tc.limit > 0 && len(got) > tc.limit) {
			t.Errorf("Cap(%q, %d) = %q (%d bytes), want %q", tc.in, tc.limit, got, len(got), tc.want)
		}
	}
}
