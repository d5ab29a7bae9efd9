package secrets

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestNewIronicCredentials(t *testing.T) {
	a, err := NewIronicCredentials()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewIronicCredentials()
	if err != nil {
		t.Fatal(err)
	}
	if string(a[KeyPassword]) == string(b[KeyPassword]) {
		t.Fatal("two generated passwords are equal")
	}
	pass := string(a[KeyPassword])
	if len(pass) != passwordLength || strings.Trim(pass, passwordAlphabet) != "" {
		t.Errorf("password %d characters, outside the alphabet: %q", len(pass), strings.Trim(pass, passwordAlphabet))
	}
	user, hash, ok := strings.Cut(string(a[KeyHtpasswd]), ":")
	if !ok || user != IronicUsername || !strings.HasPrefix(hash, "$2y$05$") {
		t.Fatalf("htpasswd %q: want %s:$2y$05$...", a[KeyHtpasswd], IronicUsername)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), a[KeyPassword]) != nil {
		t.Error("the htpasswd does not verify the password")
	}
}

func TestRepairIronicCredentials(t *testing.T) {
	good, err := NewIronicCredentials()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewIronicCredentials()
	for name, tc := range map[string]struct {
		data        map[string][]byte
		wantChanged bool
		wantErr     string
	}{
		"intact":                 {data: good},
		"htpasswd missing":       {data: map[string][]byte{KeyUsername: good[KeyUsername], KeyPassword: good[KeyPassword]}, wantChanged: true},
		"htpasswd of another":    {data: map[string][]byte{KeyUsername: good[KeyUsername], KeyPassword: good[KeyPassword], KeyHtpasswd: other[KeyHtpasswd]}, wantChanged: true},
		"htpasswd of other user": {data: map[string][]byte{KeyUsername: []byte("admin"), KeyPassword: good[KeyPassword], KeyHtpasswd: good[KeyHtpasswd]}, wantChanged: true},
		"password missing":       {data: map[string][]byte{KeyUsername: good[KeyUsername], KeyHtpasswd: good[KeyHtpasswd]}, wantErr: "has no password"},
		"username missing":       {data: map[string][]byte{KeyPassword: good[KeyPassword]}, wantErr: "has no username"},
	} {
		t.Run(name, func(t *testing.T) {
			out, changed, err := RepairIronicCredentials(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrCredentialsUnusable) {
					t.Fatalf("err = %v, want ErrCredentialsUnusable containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), string(good[KeyPassword])) {
					t.Fatal("the error shows the password")
				}
				return
			}
			if err != nil || changed != tc.wantChanged {
				t.Fatalf("changed %v, err %v; want changed %v", changed, err, tc.wantChanged)
			}
			if string(out[KeyPassword]) != string(tc.data[KeyPassword]) || string(out[KeyUsername]) != string(tc.data[KeyUsername]) {
				t.Fatal("the username or password changed")
			}
			if !htpasswdMatches(out[KeyHtpasswd], string(out[KeyUsername]), string(out[KeyPassword])) {
				t.Error("the repaired htpasswd does not match")
			}
		})
	}
}

// TestRepairIronicCredentialsTrimsPassword: a password Secret made from a file ends in a newline;
// the baremetal-operator sends the password without it (it trims the file it mounts), so the
// htpasswd must be that of the trimmed password, or Ironic answers every call with 401. The
// password in the Secret stays as it is.
func TestRepairIronicCredentialsTrimsPassword(t *testing.T) {
	raw, err := htpasswd(IronicUsername, "pw\n")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string][]byte{
		"no htpasswd":                      {KeyUsername: []byte(IronicUsername + "\n"), KeyPassword: []byte("pw\n")},
		"the htpasswd of the raw password": {KeyUsername: []byte(IronicUsername), KeyPassword: []byte("pw\n"), KeyHtpasswd: raw},
	} {
		t.Run(name, func(t *testing.T) {
			out, changed, err := RepairIronicCredentials(data)
			if err != nil || !changed {
				t.Fatalf("changed %v, err %v; want a new htpasswd", changed, err)
			}
			user, hash, _ := strings.Cut(string(out[KeyHtpasswd]), ":")
			if user != IronicUsername || bcrypt.CompareHashAndPassword([]byte(hash), []byte("pw")) != nil {
				t.Errorf("htpasswd %q does not verify %s with the trimmed password", out[KeyHtpasswd], IronicUsername)
			}
			if string(out[KeyPassword]) != "pw\n" {
				t.Errorf("the password changed to %q", out[KeyPassword])
			}
			if _, again, err := RepairIronicCredentials(out); again || err != nil {
				t.Errorf("the repaired Secret is repaired again (%v, %v)", again, err)
			}
		})
	}
	if _, _, err := RepairIronicCredentials(map[string][]byte{KeyUsername: []byte(IronicUsername), KeyPassword: []byte(" \n")}); !errors.Is(err, ErrCredentialsUnusable) {
		t.Errorf("a blank password: err %v, want ErrCredentialsUnusable", err)
	}
}

var sans = []string{"metal3-state.ns.svc", "metal3-state.ns.svc.cluster.local", "172.22.0.3"}

func issued(t *testing.T, now time.Time, names []string) map[string][]byte {
	t.Helper()
	data, err := Apply(Plan{Action: Replace}, nil, "metal3-ironic", names, now)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIssuedCertificateServes: the serving pair works as a TLS server certificate for its names,
// verified by the CA in ca.crt (what the baremetal-operator does with IRONIC_CACERT_FILE).
func TestIssuedCertificateServes(t *testing.T) {
	now := time.Now()
	data := issued(t, now, sans)
	cert, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[KeyCA]) {
		t.Fatal("ca.crt holds no certificate")
	}
	for _, name := range []string{"metal3-state.ns.svc", "172.22.0.3"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now}); err != nil {
			t.Errorf("verifying for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "metal3-state.other.svc", CurrentTime: now}); err == nil {
		t.Error("the certificate verifies for a name it does not carry")
	}
}

func TestPlanTLS(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	current := issued(t, now, sans)
	without := func(key string) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range current {
			if k != key {
				d[k] = v
			}
		}
		return d
	}
	foreign := issued(t, now, sans)
	for name, tc := range map[string]struct {
		data   map[string][]byte
		sans   []string
		at     time.Time
		want   Action
		reason string
	}{
		"nothing yet":                   {data: nil, sans: sans, at: now, want: Replace, reason: "no certificate"},
		"current":                       {data: current, sans: sans, at: now, want: Keep},
		"same names in another order":   {data: current, sans: []string{"172.22.0.3", "metal3-state.ns.svc.cluster.local", "metal3-state.ns.svc"}, at: now, want: Keep},
		"a new provisioning IP":         {data: current, sans: []string{"metal3-state.ns.svc", "metal3-state.ns.svc.cluster.local", "172.22.0.4"}, at: now, want: Issue, reason: "names"},
		"a name fewer":                  {data: current, sans: sans[:2], at: now, want: Issue, reason: "names"},
		"a month before expiry":         {data: current, sans: sans, at: now.Add(ServingValidity - RenewBefore + time.Hour), want: Issue, reason: "expires on 2027-"},
		"two months before expiry":      {data: current, sans: sans, at: now.Add(ServingValidity - 2*RenewBefore), want: Keep},
		"CA within a year of its end":   {data: current, sans: sans, at: now.Add(CAValidity - ServingValidity), want: Replace, reason: "the CA expires"},
		"serving pair missing":          {data: without(KeyCert), sans: sans, at: now, want: Issue, reason: "unusable"},
		"CA key missing":                {data: without(keyCAKey), sans: sans, at: now, want: Replace, reason: "the CA is unusable"},
		"serving from another CA":       {data: map[string][]byte{KeyCA: current[KeyCA], keyCAKey: current[keyCAKey], KeyCert: foreign[KeyCert], KeyKey: foreign[KeyKey]}, sans: sans, at: now, want: Issue, reason: "not signed by the CA"},
		"serving key of another pair":   {data: map[string][]byte{KeyCA: current[KeyCA], keyCAKey: current[keyCAKey], KeyCert: current[KeyCert], KeyKey: foreign[KeyKey]}, sans: sans, at: now, want: Issue, reason: "does not belong"},
		"serving certificate as the CA": {data: map[string][]byte{KeyCA: current[KeyCert], keyCAKey: current[KeyKey], KeyCert: current[KeyCert], KeyKey: current[KeyKey]}, sans: sans, at: now, want: Replace, reason: "not a CA"},
	} {
		t.Run(name, func(t *testing.T) {
			p := PlanTLS(tc.data, tc.sans, tc.at)
			if p.Action != tc.want || !strings.Contains(p.Reason, tc.reason) {
				t.Fatalf("plan %+v, want %s with a reason containing %q", p, tc.want, tc.reason)
			}
			out, err := Apply(p, tc.data, "metal3-ironic", tc.sans, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := PlanTLS(out, tc.sans, tc.at); got.Action != Keep {
				t.Fatalf("after applying, the plan is %+v, want Keep", got)
			}
			if p.Action == Issue && string(out[KeyCA]) != string(tc.data[KeyCA]) {
				t.Error("issuing a serving certificate replaced the CA")
			}
		})
	}
}

// TestPlanTLSSameNameTwice: a name given twice (the provisioning IP among the external IPs, one
// IPv6 address in two spellings) is issued once, and the certificate is kept at the next look,
// not reissued at every reconcile (which restarted Ironic each time). A certificate that carries
// a name twice, as earlier versions issued them, is kept too.
func TestPlanTLSSameNameTwice(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	svc := []string{"metal3-state.ns.svc", "metal3-state.ns.svc.cluster.local"}
	for name, tc := range map[string]struct {
		names   []string
		wantIPs []string
	}{
		"an IPv4 address twice":            {names: append(svc[:2:2], "192.168.111.5", "192.168.111.5"), wantIPs: []string{"192.168.111.5"}},
		"an IPv6 address in two spellings": {names: append(svc[:2:2], "fd00::5", "fd00:0::5"), wantIPs: []string{"fd00::5"}},
		"an IPv4 address and its mapped form": {names: append(svc[:2:2], "192.168.111.5", "::ffff:192.168.111.5"),
			wantIPs: []string{"192.168.111.5"}},
	} {
		t.Run(name, func(t *testing.T) {
			data := issued(t, now, tc.names)
			if p := PlanTLS(data, tc.names, now); p.Action != Keep {
				t.Fatalf("the certificate just issued: plan %+v, want Keep", p)
			}
			leaf, err := parseCert(data[KeyCert])
			if err != nil {
				t.Fatal(err)
			}
			var ips []string
			for _, ip := range leaf.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tc.wantIPs) || !slices.Equal(leaf.DNSNames, svc) {
				t.Errorf("issued for IPs %q and names %q, want %q and %q", ips, leaf.DNSNames, tc.wantIPs, svc)
			}

			// As an earlier version issued it: every name as given.
			ca := Pair{CertPEM: data[KeyCA], KeyPEM: data[keyCAKey]}
			caCert, caKey, err := parse(ca)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(ServingValidity), DNSNames: svc,
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			for _, n := range tc.names[2:] {
				tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(n))
			}
			old, err := issue(tmpl, caCert, caKey)
			if err != nil {
				t.Fatal(err)
			}
			if p := PlanTLS(TLSData(ca, old), tc.names, now); p.Action != Keep {
				t.Errorf("a certificate with the name twice: plan %+v, want Keep", p)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	if Fingerprint([]byte("a"), []byte("b")) == Fingerprint([]byte("a"), []byte("c")) {
		t.Error("different content, same fingerprint")
	}
	if got := Fingerprint([]byte("a")); len(got) != 16 || got != Fingerprint([]byte("a")) {
		t.Errorf("fingerprint %q: want 16 stable hex digits", got)
	}
}
