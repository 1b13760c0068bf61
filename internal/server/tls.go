package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// certCheckInterval is how often, at most, the certificate files are
// looked at for a change.
const certCheckInterval = time.Second

// Certificate is the listener's certificate, read from a PEM certificate
// chain and key, and read again when either file changes (its
// modification time or size), so that a renewed certificate is served
// without a restart. The files are looked at during a handshake, at most
// once per second; a pair that fails to load keeps the certificate
// before it and logs why.
type Certificate struct {
	certFile, keyFile string
	log               *slog.Logger
	// now is the clock of the checks (tests replace it).
	now func() time.Time

	mu      sync.Mutex // guards the fields below
	cert    *tls.Certificate
	stamp   [2]fileStamp // of the files the certificate was read from
	checked time.Time
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	mod  int64 // nanoseconds since the epoch
	size int64
}

// NewCertificate reads the certificate and key; log (nil discards)
// receives why a changed pair does not load.
func NewCertificate(certFile, keyFile string, log *slog.Logger) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile, log: telemetry.Discard(log), now: time.Now}
	stamp, err := c.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, c.now()
	return c, nil
}

// TLSConfig returns a server configuration that serves the certificate,
// TLS 1.2 or later.
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate}
}

// GetCertificate implements tls.Config.GetCertificate.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.checked) < certCheckInterval {
		return c.cert, nil
	}
	c.checked = now
	stamp, err := c.stamps()
	if err != nil {
		c.log.Warn("tls certificate files unreadable: serving the previous certificate", telemetry.KeyErr, err)
		return c.cert, nil
	}
	if stamp == c.stamp {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		// A renewal writes two files, one after the other: the pair may
		// not match for a moment. The next check (a second later) reads
		// them again, since the stamp is kept.
		c.log.Warn("tls certificate did not load: serving the previous certificate", telemetry.KeyErr, err)
		return c.cert, nil
	}
	c.cert, c.stamp = &cert, stamp
	c.log.Info("tls certificate reloaded", "cert_file", c.certFile)
	return c.cert, nil
}

func (c *Certificate) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("tls: %w", err)
		}
		out[i] = fileStamp{mod: fi.ModTime().UnixNano(), size: fi.Size()}
	}
	return out, nil
}
