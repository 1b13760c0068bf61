package upstream_test

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// TestHTTPSUpstreamWithPrivateCAAndClientCertificate: an https://
// upstream whose certificate comes from a private CA and which requires
// a client certificate (mutual TLS) is reached with tls.ca_file and
// tls.cert_file/key_file, checked for tls.server_name when set; without
// the CA, or without the client certificate, or checked for another
// name, it is not.
func TestHTTPSUpstreamWithPrivateCAAndClientCertificate(t *testing.T) {
	t.Parallel()
	serverCert, clientCert := mcptest.NewCert(t, 1, false), mcptest.NewCert(t, 2, true)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, TLS: &tls.Config{
		Certificates: []tls.Certificate{serverCert.TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    mcptest.Pool(clientCert),
	}})
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	mcptest.WriteFileAt(t, caFile, serverCert.CertPEM, time.Time{})
	clientCert.Write(t, certFile, keyFile, time.Time{})

	connect := func(ca, cert, key, name string) error {
		t.Helper()
		cfg, err := upstream.ClientTLS(ca, cert, key, name)
		if err != nil {
			t.Fatalf("ClientTLS: %v", err)
		}
		opts := httpOptions(srv.URL)
		opts.TLS = cfg
		c, err := upstream.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Start(testCtx(t)); err != nil {
			return err
		}
		if got := callTool(t, testCtx(t), c, "echo", `{"text":"over mtls"}`); got != "over mtls" {
			t.Errorf("echo = %q", got)
		}
		return nil
	}
	if err := connect(caFile, certFile, keyFile, ""); err != nil {
		t.Fatalf("with the CA and the client certificate: %v", err)
	}
	if err := connect(caFile, certFile, keyFile, "localhost"); err != nil {
		t.Errorf("checked for server_name localhost: %v", err)
	}
	for _, tc := range []struct{ name, ca, cert, key, serverName, want string }{
		{"system CAs", "", certFile, keyFile, "", "certificate"},
		{"no client certificate", caFile, "", "", "", "certificate"},
		{"another server name", caFile, certFile, keyFile, "crm.internal", "crm.internal"},
	} {
		if err := connect(tc.ca, tc.cert, tc.key, tc.serverName); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start = %v, want an error about the %s", tc.name, err, tc.want)
		}
	}
}

func TestClientTLSErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	mcptest.WriteFileAt(t, notPEM, []byte("not a certificate"), time.Time{})
	for _, tc := range []struct{ name, ca, cert, key, want string }{
		{"missing CA file", filepath.Join(dir, "nope.pem"), "", "", "tls ca_file"},
		{"CA file without certificates", notPEM, "", "", "no PEM certificate"},
		{"certificate without key", "", notPEM, "", "go together"},
		{"unreadable pair", "", notPEM, notPEM, "tls client certificate"},
	} {
		if _, err := upstream.ClientTLS(tc.ca, tc.cert, tc.key, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	cfg, err := upstream.ClientTLS("", "", "", "")
	if err != nil || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs != nil {
		t.Errorf("no files: %+v, %v; want TLS 1.2+ with the system's CAs", cfg, err)
	}
}
