package server

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// TestCertificateReload: the listener serves its certificate over TLS
// 1.2 or later, and serves a renewed one once its files change: looked
// at no more than once per second, and a pair that does not load keeps
// the previous certificate, with a warning.
func TestCertificateReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key")
	a, b := mcptest.NewCert(t, 1, false), mcptest.NewCert(t, 2, false)
	mod := time.Now().Add(-time.Hour)
	a.Write(t, certFile, keyFile, mod)

	logs := &mcptest.LogBuffer{}
	c, err := NewCertificate(certFile, keyFile, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var clockMu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	advance := func(d time.Duration) { clockMu.Lock(); defer clockMu.Unlock(); now = now.Add(d) }
	c.checked = now

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		TLSConfig: c.TLSConfig(),
		ErrorLog:  slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	roots := mcptest.Pool(a, b)
	url := "https://" + ln.Addr().String() + "/healthz"
	serial := func(tc *tls.Config) (int64, error) {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(url)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
	}
	served1 := func(what string, want int64) {
		t.Helper()
		got, err := serial(&tls.Config{RootCAs: roots})
		if err != nil || got != want {
			t.Errorf("%s: serial %d, %v; want %d", what, got, err, want)
		}
	}

	served1("at start", 1)
	b.Write(t, certFile, keyFile, mod.Add(time.Minute))
	served1("renewed, within the second", 1)
	advance(time.Second)
	served1("renewed, a second later", 2)

	mcptest.WriteFileAt(t, certFile, []byte("not a certificate"), mod.Add(2*time.Minute))
	advance(time.Second)
	served1("a broken renewal", 2)
	if !strings.Contains(logs.String(), "tls certificate did not load") {
		t.Errorf("no warning for the broken renewal:\n%s", logs)
	}
	a.Write(t, certFile, keyFile, mod.Add(3*time.Minute))
	advance(time.Second)
	served1("fixed", 1)

	if _, err := serial(&tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	if _, err := serial(&tls.Config{}); err == nil {
		t.Error("a client that does not trust the certificate was served")
	}
}

func TestNewCertificateErrors(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key")
	if _, err := NewCertificate(certFile, keyFile, nil); err == nil || !strings.Contains(err.Error(), "gw.pem") {
		t.Errorf("missing files: %v, want an error naming the file", err)
	}
	a, b := mcptest.NewCert(t, 1, false), mcptest.NewCert(t, 2, false)
	mcptest.WriteFileAt(t, certFile, a.CertPEM, time.Now())
	mcptest.WriteFileAt(t, keyFile, b.KeyPEM, time.Now())
	if _, err := NewCertificate(certFile, keyFile, nil); err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Errorf("a key that is not the certificate's: %v", err)
	}
}
