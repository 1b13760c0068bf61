package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ClientTLS returns the TLS configuration of an https:// upstream, TLS
// 1.2 or later: caFile, when set, is a PEM bundle of the CAs the
// server's certificate must chain to, in place of the system's;
// certFile and keyFile, when set, a client certificate and its key
// (mutual TLS); serverName, when set, the name the server's certificate
// is checked for and sent as SNI, in place of the URL's host. The files
// are read now, once: the caller builds the configuration again to pick
// up renewed files.
func ClientTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca_file %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate (%s, %s): %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case certFile != "" || keyFile != "":
		return nil, errors.New("tls: cert_file and key_file go together")
	}
	return cfg, nil
}
