package mcptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// Cert is a self-signed certificate (its own CA) for 127.0.0.1 and
// localhost, valid for an hour around its creation, in PEM as files
// hold it.
type Cert struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCert makes a certificate with the given serial number; client makes
// it a client certificate (for mutual TLS) instead of a server one.
func NewCert(t testing.TB, serial int64, client bool) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "mcp-gateway test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
}

// TLS returns the certificate with its key, for a tls.Config.
func (c *Cert) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// Pool returns a pool that trusts the certificates.
func Pool(certs ...*Cert) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c.Cert)
	}
	return p
}

// Write puts the certificate and key in the files, with modification
// time mod (the zero time leaves the file system's).
func (c *Cert) Write(t testing.TB, certFile, keyFile string, mod time.Time) {
	t.Helper()
	WriteFileAt(t, certFile, c.CertPEM, mod)
	WriteFileAt(t, keyFile, c.KeyPEM, mod)
}

// WriteFileAt writes a file with modification time mod (the zero time
// leaves the file system's).
func WriteFileAt(t testing.TB, file string, data []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if !mod.IsZero() {
		if err := os.Chtimes(file, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}
