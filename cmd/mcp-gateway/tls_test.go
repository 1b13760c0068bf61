package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// TestServeTLS: with tls set, the serve command speaks HTTPS only, with
// the configured certificate, says so in the URL it logs, and serves
// MCP to a client that trusts the certificate.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key")
	cert := mcptest.NewCert(t, 7, false)
	cert.Write(t, certFile, keyFile, time.Time{})
	path := writeConfig(t, map[string]any{"tls": map[string]any{"cert_file": certFile, "key_file": keyFile}}, "echo")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, stop := context.WithCancel(context.Background())
	logs := &mcptest.LogBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--config", path, "--listen", addr}, nil, io.Discard, logs)
	}()
	defer func() {
		stop()
		if code := <-exited; code != exitOK {
			t.Errorf("serve exited %d:\n%s", code, logs)
		}
	}()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: mcptest.Pool(cert)}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("https://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 7 {
					t.Fatalf("served certificate: %+v", resp.TLS)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("https://%s/readyz did not become ready: %v\n%s", addr, err, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if want := `"address":"https://` + addr + `/mcp"`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, logs)
	}
	// Plain HTTP gets no MCP answer.
	if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served")
		}
	}

	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(cctx,
		&mcp.StreamableClientTransport{Endpoint: "https://" + addr + "/mcp", HTTPClient: client}, &mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got, err := callText(cctx, cs, "echo__echo", map[string]any{"text": "over tls"}); err != nil || got != "over tls" {
		t.Errorf("echo over TLS: %q, %v", got, err)
	}
}

// TestHTTPSUpstreamWithClientCertificate: an upstream behind mutual TLS
// and a private CA serves its tools through the gateway configured with
// its tls settings; the same upstream without them is down, and its
// tools absent.
func TestHTTPSUpstreamWithClientCertificate(t *testing.T) {
	serverCert, clientCert := mcptest.NewCert(t, 1, false), mcptest.NewCert(t, 2, true)
	srv := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, TLS: &tls.Config{
		Certificates: []tls.Certificate{serverCert.TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    mcptest.Pool(clientCert),
	}})
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	mcptest.WriteFileAt(t, caFile, serverCert.CertPEM, time.Time{})
	clientCert.Write(t, certFile, keyFile, time.Time{})

	cfg := config.Default()
	mtls := httpUpstream("crm", srv.URL)
	mtls.TLS = &config.UpstreamTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile, ServerName: "localhost"}
	cfg.Upstreams = []config.Upstream{mtls, httpUpstream("plain", srv.URL)}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := connectAs(t, url, eras[1], "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := callText(ctx, cs, "crm__echo", map[string]any{"text": "mtls"}); err != nil || got != "mtls" {
		t.Errorf("crm__echo: %q, %v", got, err)
	}
	for _, n := range toolNames(ctx, t, cs, "tools/list") {
		if strings.HasPrefix(n, "plain__") {
			t.Errorf("the upstream without its tls settings offers %s", n)
		}
	}
}
