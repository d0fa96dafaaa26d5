package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client certificate it signed, as PEM
// files in a directory of the test's own.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "srq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "srq test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	serverDER, serverKey := leaf(2, x509.ExtKeyUsageServerAuth)
	clientDER, clientKey := leaf(3, x509.ExtKeyUsageClientAuth)
	return testPKI{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", serverDER),
		serverKey:  write("server-key.pem", "PRIVATE KEY", keyDER(serverKey)),
		clientCert: write("client.pem", "CERTIFICATE", clientDER),
		clientKey:  write("client-key.pem", "PRIVATE KEY", keyDER(clientKey)),
	}
}

// TestTLSFlags: against a redis-server that speaks only TLS on one port and asks for a client
// certificate, --tls-ca makes srq trust the server, and --tls-cert/--tls-key give it the client
// certificate; each missing piece fails with a message that names it.
func TestTLSFlags(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redistest.StartProcess("--tls-port", strconv.Itoa(port), "--tls-cert-file", pki.serverCert,
		"--tls-key-file", pki.serverKey, "--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "yes")
	if err != nil {
		redistest.Skip(t, err.Error(), "a redis-server with TLS (TestTLSConfigFromFlags checks the configuration)")
	}
	t.Cleanup(srv.Stop)
	url := "rediss://127.0.0.1:" + strconv.Itoa(port) + "?max_retries=-1&dial_timeout=5s"
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"trusted, with a client certificate", []string{"--tls-ca", pki.ca, "--tls-cert", pki.clientCert, "--tls-key", pki.clientKey}, 0, ""},
		{"flags after the command", []string{"queues", "--tls-ca", pki.ca, "--tls-cert", pki.clientCert, "--tls-key", pki.clientKey}, 0, ""},
		{"the server not trusted", []string{"--tls-cert", pki.clientCert, "--tls-key", pki.clientKey}, 1, "--tls-ca"},
		{"no client certificate", []string{"--tls-ca", pki.ca}, 1, "cannot reach Redis"},
		{"a certificate without its key", []string{"--tls-ca", pki.ca, "--tls-cert", pki.clientCert}, 2, "--tls-cert and --tls-key go together"},
		{"a CA file without PEM", []string{"--tls-ca", notPEM}, 2, "holds no PEM certificate"},
		{"a CA file that is not there", []string{"--tls-ca", notPEM + ".nope"}, 2, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--redis-url", url}, tt.args...)
			if tt.args[0] != "queues" {
				args = append(args, "queues")
			}
			var out, errb bytes.Buffer
			code := run(t.Context(), args, strings.NewReader(""), &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.say) {
				t.Fatalf("exit %d, stderr %q; want exit %d saying %q", code, errb.String(), tt.code, tt.say)
			}
			if code == 0 && !strings.Contains(out.String(), "no registered queues") {
				t.Fatalf("queues over TLS: %q", out.String())
			}
		})
	}
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"--redis-url", "redis://" + srv.Addr, "--tls-ca", pki.ca, "queues"}, strings.NewReader(""), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "need a rediss:// URL") {
		t.Fatalf("--tls-ca with redis://: exit %d, %q", code, errb.String())
	}
}

// TestTLSConfigFromFlags: the TLS configuration the flags build holds the CA and the client
// certificate, and keeps what the rediss:// URL set.
func TestTLSConfigFromFlags(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	o := options{redisURL: "rediss://127.0.0.1:6380", tlsCA: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey}
	opt, err := redis.ParseURL(o.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.applyTLS(opt); err != nil {
		t.Fatal(err)
	}
	c := opt.TLSConfig
	if c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "127.0.0.1" || c.MinVersion == 0 {
		t.Fatalf("TLS config %+v", c)
	}
	caPEM, _ := os.ReadFile(pki.ca)
	block, _ := pem.Decode(caPEM)
	ca, _ := x509.ParseCertificate(block.Bytes)
	if _, err := ca.Verify(x509.VerifyOptions{Roots: c.RootCAs}); err != nil {
		t.Fatalf("the pool does not hold the CA: %v", err)
	}
}
