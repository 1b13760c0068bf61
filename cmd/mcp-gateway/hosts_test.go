package main

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// TestListenerDecidesOriginAndHost: the gateway's Host and Origin checks
// follow its listen address and allowed_hosts. On every interface it
// accepts each interface's address as Host (an operator connecting by
// the machine's IP is not locked out) and no loopback origin; a list in
// allowed_hosts replaces the default.
func TestListenerDecidesOriginAndHost(t *testing.T) {
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	status := func(t *testing.T, url, host, origin string) int {
		t.Helper()
		req, err := http.NewRequest("POST", url, strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("every interface", func(t *testing.T) {
		cfg := config.Default()
		cfg.Listen = ":8080" // not bound: the test serves the handler itself
		url, _, _ := startGatewayWith(t, cfg, recorders{})
		addrs, err := net.InterfaceAddrs()
		if err != nil || len(addrs) == 0 {
			t.Skip("no interface addresses")
		}
		for _, a := range addrs {
			ip := a.(*net.IPNet).IP
			if got := status(t, url, net.JoinHostPort(ip.String(), "8080"), ""); got != 200 {
				t.Errorf("Host %s: %d, want 200", ip, got)
			}
		}
		if got := status(t, url, "attacker.example:8080", ""); got != 403 {
			t.Errorf("foreign Host: %d, want 403", got)
		}
		if got := status(t, url, "localhost:8080", "http://localhost:3000"); got != 403 {
			t.Errorf("loopback Origin on every interface: %d, want 403", got)
		}
	})

	t.Run("allowed_hosts on loopback", func(t *testing.T) {
		cfg := config.Default()
		cfg.AllowedHosts = []string{"gw.example.com"}
		url, _, _ := startGatewayWith(t, cfg, recorders{})
		if got := status(t, url, "gw.example.com", "http://localhost:3000"); got != 200 {
			t.Errorf("listed Host with a loopback Origin on loopback: %d, want 200", got)
		}
		if got := status(t, url, "localhost:8080", ""); got != 403 {
			t.Errorf("Host not in allowed_hosts: %d, want 403 (the list replaces the default)", got)
		}
	})
}
