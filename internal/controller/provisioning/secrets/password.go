package secrets

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Names and keys of the Secrets the operator makes, as OpenShift's cluster-baremetal-operator names
// them (tools and docs written for it find them).
const (
	// IronicCredentials holds the Ironic API user: username, password and htpasswd.
	IronicCredentials = "metal3-ironic-password"
	// IronicTLS holds Ironic's serving certificate and its CA: tls.crt, tls.key, ca.crt.
	IronicTLS = "metal3-ironic-tls"
	// BMOWebhookCert is the baremetal-operator's webhook serving certificate.
	BMOWebhookCert = "baremetal-operator-webhook-server-cert"
	// CBOWebhookCert is the cluster-baremetal-operator's own webhook serving certificate.
	CBOWebhookCert = "cluster-baremetal-webhook-server-cert"

	// IronicUsername is the Ironic API user.
	IronicUsername = "ironic-user"

	KeyUsername = "username"
	KeyPassword = "password"
	KeyHtpasswd = "htpasswd"
	KeyCert     = "tls.crt"
	KeyKey      = "tls.key"
	KeyCA       = "ca.crt"
)

// passwordLength and passwordAlphabet: 16 characters of 62 is 95 bits, and nothing any config
// format or shell needs to quote.
const (
	passwordLength   = 16
	passwordAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// htpasswdCost is the bcrypt cost of the htpasswd entry. Ironic checks the password against it on
// every API request (it caches nothing), so the cost is paid per request: 5 keeps that under a
// millisecond, as the cluster baremetal operator chose; the password itself is random, not a
// human's, so a low cost does not make it guessable.
const htpasswdCost = 5

// NewIronicCredentials returns the data of a new Ironic credentials Secret.
func NewIronicCredentials() (map[string][]byte, error) {
	pass, err := randomPassword()
	if err != nil {
		return nil, err
	}
	h, err := htpasswd(IronicUsername, pass)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyUsername: []byte(IronicUsername), KeyPassword: []byte(pass), KeyHtpasswd: h}, nil
}

// ErrCredentialsUnusable: the Secret exists but cannot be repaired without a new password.
var ErrCredentialsUnusable = errors.New("unusable Ironic credentials")

// RepairIronicCredentials checks an existing credentials Secret's data. Username and password are
// never changed: when one is missing the Secret is unusable (ErrCredentialsUnusable; deleting it
// makes the operator generate a new one). A missing htpasswd, or one that does not match the
// password, is recomputed: data then holds the repaired content and changed is true. The error
// never shows the password.
//
// The htpasswd is that of the password without surrounding white space: the baremetal-operator
// trims the files it reads the credentials from, so a Secret made from a file ending in a newline
// must not give Ironic the hash of the newline too (every call would get 401).
func RepairIronicCredentials(data map[string][]byte) (repaired map[string][]byte, changed bool, err error) {
	user, pass := strings.TrimSpace(string(data[KeyUsername])), strings.TrimSpace(string(data[KeyPassword]))
	switch {
	case user == "":
		return nil, false, fmt.Errorf("%w: Secret %s has no %s", ErrCredentialsUnusable, IronicCredentials, KeyUsername)
	case pass == "":
		return nil, false, fmt.Errorf("%w: Secret %s has no %s", ErrCredentialsUnusable, IronicCredentials, KeyPassword)
	}
	if htpasswdMatches(data[KeyHtpasswd], user, pass) {
		return data, false, nil
	}
	h, err := htpasswd(user, pass)
	if err != nil {
		return nil, false, err
	}
	out := make(map[string][]byte, len(data))
	for k, v := range data {
		out[k] = v
	}
	out[KeyHtpasswd] = h
	return out, true, nil
}

// htpasswd is one "user:$2y$..." line, in Apache's notation ($2y$; Go writes $2a$, the same
// algorithm), which both Ironic and Apache-based images accept.
func htpasswd(user, pass string) ([]byte, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pass), htpasswdCost)
	if err != nil {
		return nil, fmt.Errorf("hashing the Ironic password: %w", err)
	}
	if bytes.HasPrefix(h, []byte("$2a$")) {
		h = append([]byte("$2y$"), h[4:]...)
	}
	return append([]byte(user+":"), h...), nil
}

func htpasswdMatches(line []byte, user, pass string) bool {
	u, hash, ok := bytes.Cut(bytes.TrimSpace(line), []byte(":"))
	if !ok || string(u) != user {
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
}

func randomPassword() (string, error) {
	b := make([]byte, passwordLength)
	limit := big.NewInt(int64(len(passwordAlphabet)))
	for i := range b {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return "", fmt.Errorf("generating the Ironic password: %w", err)
		}
		b[i] = passwordAlphabet[n.Int64()]
	}
	return string(b), nil
}
