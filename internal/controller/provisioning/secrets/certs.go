package secrets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// Validity and renewal margins.
const (
	CAValidity      = 10 * 365 * 24 * time.Hour
	ServingValidity = 365 * 24 * time.Hour
	// RenewBefore: a serving certificate is renewed this long before it expires.
	RenewBefore = 30 * 24 * time.Hour
	// CARenewBefore: the CA is replaced when it would expire within this time, so a serving
	// certificate it signs is never valid longer than the CA.
	CARenewBefore = ServingValidity + RenewBefore
	// clockSkew backdates NotBefore so that clients whose clock is a little behind accept it.
	clockSkew = 5 * time.Minute
)

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA.
func NewCA(commonName string, now time.Time) (Pair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return issue(tmpl, nil, nil)
}

// NewServing makes a serving certificate for sans (DNS names and IP addresses) signed by ca. Each
// name is issued once, IP addresses in their canonical form: the same address given twice (the
// provisioning IP among the external IPs, fd00::5 and fd00:0::5) is one name.
func NewServing(ca Pair, sans []string, now time.Time) (Pair, error) {
	sans = uniqueNames(sans)
	caCert, caKey, err := parse(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("reading the CA: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: firstDNS(sans)},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(ServingValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	return issue(tmpl, caCert, caKey)
}

func firstDNS(sans []string) string {
	for _, s := range sans {
		if net.ParseIP(s) == nil {
			return s
		}
	}
	if len(sans) > 0 {
		return sans[0]
	}
	return "metal3"
}

func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Pair{}, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return Pair{}, fmt.Errorf("signing the certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encoding the key: %w", err)
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func parse(p Pair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := parseCert(p.CertPEM)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(p.KeyPEM)
	if block == nil {
		return nil, nil, errors.New("no PEM private key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the private key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("the private key does not belong to the certificate")
	}
	return cert, key, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// TLSData is the content of a TLS Secret: the serving pair, the CA certificate and the CA's key.
func TLSData(ca, serving Pair) map[string][]byte {
	return map[string][]byte{KeyCert: serving.CertPEM, KeyKey: serving.KeyPEM, KeyCA: ca.CertPEM, keyCAKey: ca.KeyPEM}
}

// keyCAKey keeps the CA's key in the same Secret, so that a renewal of the serving certificate
// keeps the CA every client trusts. Pods mount these Secrets with volume items that leave it out
// (ServingKeys), so only the operator ever reads it.
const keyCAKey = "ca.key"

// ServingKeys are the keys of a TLS Secret a pod may see.
var ServingKeys = []string{KeyCert, KeyKey, KeyCA}

// Plan says what to do with a TLS Secret's data.
type Plan struct {
	// Action is Keep, Issue (a new serving certificate from the current CA) or Replace (a new CA
	// too).
	Action Action
	// Reason says why, for events and logs (never key material).
	Reason string
}

// Action is what PlanTLS decided.
type Action string

const (
	Keep    Action = "Keep"
	Issue   Action = "Issue"
	Replace Action = "Replace"
)

// PlanTLS decides what a TLS Secret with data needs, for the names sans, at now.
func PlanTLS(data map[string][]byte, sans []string, now time.Time) Plan {
	ca := Pair{CertPEM: data[KeyCA], KeyPEM: data[keyCAKey]}
	caCert, _, err := parse(ca)
	switch {
	case len(data) == 0:
		return Plan{Replace, "no certificate yet"}
	case err != nil:
		return Plan{Replace, "the CA is unusable: " + err.Error()}
	case !caCert.IsCA:
		return Plan{Replace, "ca.crt is not a CA"}
	case now.Add(CARenewBefore).After(caCert.NotAfter):
		return Plan{Replace, fmt.Sprintf("the CA expires on %s", caCert.NotAfter.UTC().Format(time.DateOnly))}
	}
	serving, _, err := parse(Pair{CertPEM: data[KeyCert], KeyPEM: data[KeyKey]})
	switch {
	case err != nil:
		return Plan{Issue, "the serving certificate is unusable: " + err.Error()}
	case serving.CheckSignatureFrom(caCert) != nil:
		return Plan{Issue, "the serving certificate is not signed by the CA"}
	case now.Add(RenewBefore).After(serving.NotAfter):
		return Plan{Issue, fmt.Sprintf("the serving certificate expires on %s", serving.NotAfter.UTC().Format(time.DateOnly))}
	case !slices.Equal(certNames(serving), nameSet(sans)):
		return Plan{Issue, fmt.Sprintf("its names %s are not the wanted %s", strings.Join(certNames(serving), ","), strings.Join(nameSet(sans), ","))}
	}
	return Plan{Keep, ""}
}

// Apply carries out a plan, returning the new Secret data (data itself for Keep).
func Apply(p Plan, data map[string][]byte, commonName string, sans []string, now time.Time) (map[string][]byte, error) {
	ca := Pair{CertPEM: data[KeyCA], KeyPEM: data[keyCAKey]}
	switch p.Action {
	case Keep:
		return data, nil
	case Replace:
		var err error
		if ca, err = NewCA(commonName, now); err != nil {
			return nil, err
		}
	}
	serving, err := NewServing(ca, sans, now)
	if err != nil {
		return nil, err
	}
	return TLSData(ca, serving), nil
}

// certNames are the names a certificate carries, as a set (see nameSet): a certificate issued
// with a name twice (as earlier versions did) still matches the names it was issued for, and is
// not reissued at every reconcile.
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return nameSet(names)
}

// nameSet is names as a sorted set of canonical names, for comparing what a certificate carries
// with what it should carry.
func nameSet(names []string) []string {
	out := uniqueNames(names)
	slices.Sort(out)
	return out
}

// uniqueNames keeps the first occurrence of each name, in order, IP addresses in their canonical
// form (net.IP.String: fd00:0::5 is fd00::5, ::ffff:10.0.0.1 is 10.0.0.1, as x509 stores them).
func uniqueNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, s := range names {
		if ip := net.ParseIP(s); ip != nil {
			s = ip.String()
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// CredentialsFingerprint is a short stable digest of the Ironic credentials Secret's data, for the
// pod template annotations that restart Ironic and the baremetal-operator together when the
// credentials change (each reads them only at start: with one restarted alone, the two disagree
// and every API call fails with 401). It digests the htpasswd, which RepairIronicCredentials keeps
// matching the user and password (a new user or password gets a new htpasswd), so the digest
// changes with either; and it is no fast oracle for the password, which only bcrypt with the
// htpasswd's salt can test.
func CredentialsFingerprint(data map[string][]byte) string {
	return Fingerprint(data[KeyHtpasswd])
}

// Fingerprint is a short stable digest of certificate PEM, for pod template annotations that roll
// a Deployment when its certificate changes (and never show key material).
func Fingerprint(pems ...[]byte) string {
	h := sha256.New()
	for _, p := range pems {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
