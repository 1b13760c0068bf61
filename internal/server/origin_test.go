package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// TestOriginAndHostOnAnyListener: against DNS rebinding (2025-11-25
// basic/transports, "Security Warning"), a listener that is not on a
// loopback address accepts only the allowed Host values on its MCP
// endpoint and only allowed_origins as Origin: a loopback origin is no
// proof there, and neither is an Origin equal to the Host, which is
// exactly what a rebinding page sends. /healthz answers whatever the
// Host; /readyz and /metrics answer an IP literal (probes by pod IP) or an
// allowed host, and refuse a DNS name that is not allowed: a rebinding
// page would read upstream errors and metrics there.
func TestOriginAndHostOnAnyListener(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "# metrics\n") })
	ts, _ := newTestServer(t, &Options{
		AllowedOrigins: []string{"https://app.example.com"},
		AllowedHosts:   []string{"gw.example.com", "10.1.2.3:8080", "::1", "[fd00::1]:8080"},
		Metrics:        metrics,
	})
	send := func(path, host, origin string) *http.Response {
		t.Helper()
		method, body := "POST", initBody
		if path != "/mcp" {
			method, body = "GET", ""
		}
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	tests := []struct {
		name, path, host, origin string
		status                   int
		refused                  string // what the 403 names
	}{
		{"allowed host", "/mcp", "gw.example.com", "", 200, ""},
		{"allowed host in another case, any port", "/mcp", "GW.Example.com:9443", "", 200, ""},
		{"allowed host:port", "/mcp", "10.1.2.3:8080", "", 200, ""},
		{"allowed IPv6 host", "/mcp", "[::1]:8080", "", 200, ""},
		{"allowed IPv6 host:port", "/mcp", "[fd00::1]:8080", "", 200, ""},
		{"allowed host on another port", "/mcp", "10.1.2.3:80", "", 403, `Host "10.1.2.3:80"`},
		{"foreign host", "/mcp", "attacker.example", "", 403, `Host "attacker.example"`},
		{"loopback host not listed", "/mcp", "localhost:8080", "", 403, `Host "localhost:8080"`},
		{"rebinding: Origin equal to Host", "/mcp", "gw.example.com", "http://gw.example.com", 403, `Origin "http://gw.example.com"`},
		{"loopback origin on a non-loopback listener", "/mcp", "gw.example.com", "http://localhost:3000", 403, `Origin "http://localhost:3000"`},
		{"allowed origin", "/mcp", "gw.example.com", "https://app.example.com", 200, ""},
		{"healthz with a foreign Host", "/healthz", "10.9.9.9:8080", "", 200, ""},
		{"healthz with a foreign name", "/healthz", "attacker.example", "", 200, ""},
		{"readyz by a pod IP", "/readyz", "10.9.9.9:8080", "", 200, ""},
		{"readyz by a bare IP", "/readyz", "10.9.9.9", "", 200, ""},
		{"readyz by an IPv6 literal", "/readyz", "[fd00::9]:8080", "", 200, ""},
		{"readyz by an allowed name", "/readyz", "GW.example.com:9443", "", 200, ""},
		{"readyz with a foreign name", "/readyz", "attacker.example:8080", "", 403, `Host "attacker.example:8080"`},
		{"metrics by a pod IP", "/metrics", "10.9.9.9:8080", "", 200, ""},
		{"metrics by an allowed name", "/metrics", "gw.example.com", "", 200, ""},
		{"metrics with a foreign name", "/metrics", "attacker.example", "", 403, `Host "attacker.example"`},
		{"healthz with a foreign Origin", "/healthz", "10.9.9.9:8080", "https://evil.example", 403, `Origin "https://evil.example"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(tt.path, tt.host, tt.origin)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tt.status)
			}
			if tt.refused == "" {
				return
			}
			m, err := jsonrpc.Decode(b)
			if err != nil || m.Error == nil {
				t.Fatalf("403 body %q is not a JSON-RPC error", b)
			}
			if !strings.Contains(m.Error.Message, tt.refused) {
				t.Errorf("403 message %q, want it to name %s", m.Error.Message, tt.refused)
			}
		})
	}
}

// TestOriginAndHostOnLoopback: on a loopback listener loopback origins
// and loopback Host names are accepted without configuration; foreign
// ones are refused.
func TestOriginAndHostOnLoopback(t *testing.T) {
	ts, _ := newTestServer(t, &Options{Loopback: true})
	for _, tt := range []struct {
		host, origin string
		status       int
	}{
		{"", "", 200}, // the test server's own 127.0.0.1:port
		{"localhost:8080", "http://localhost:3000", 200},
		{"[::1]:8080", "http://[::1]:3000", 200},
		{"127.0.0.1:8080", "http://127.0.0.1:8080", 200},
		{"attacker.example:8080", "", 403},
		{"attacker.example:8080", "http://attacker.example:8080", 403},
		{"localhost:8080", "https://evil.example", 403},
	} {
		req, err := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(initBody))
		if err != nil {
			t.Fatal(err)
		}
		if tt.host != "" {
			req.Host = tt.host
		}
		req.Header.Set("Content-Type", "application/json")
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("Host %q Origin %q: status %d, want %d", tt.host, tt.origin, resp.StatusCode, tt.status)
		}
	}
}

// TestRebindingOnLoopbackReadsNoProbes: on a loopback listener a page
// under a DNS name that resolves to 127.0.0.1 sends a same-origin GET
// without Origin; /readyz (upstream errors with internal URLs) and
// /metrics refuse its Host, /healthz (which tells nothing) answers it,
// and loopback names and IPs still reach all three.
func TestRebindingOnLoopbackReadsNoProbes(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "# metrics\n") })
	ts, _ := newTestServer(t, &Options{Loopback: true, Metrics: metrics})
	for _, tt := range []struct {
		path, host string
		status     int
	}{
		{"/readyz", "rebind.attacker.example:8080", 403},
		{"/metrics", "rebind.attacker.example:8080", 403},
		{"/healthz", "rebind.attacker.example:8080", 200},
		{"/readyz", "localhost:8080", 200},
		{"/metrics", "127.0.0.1:8080", 200},
		{"/readyz", "[::1]:8080", 200},
	} {
		req, err := http.NewRequest("GET", ts.URL+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tt.host
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("GET %s with Host %q: status %d (%s), want %d", tt.path, tt.host, resp.StatusCode, b, tt.status)
		}
		if tt.status == 403 && !strings.Contains(string(b), "allowed_hosts") {
			t.Errorf("GET %s with Host %q: 403 body %q does not say what to list", tt.path, tt.host, b)
		}
	}
}

func TestListenerHosts(t *testing.T) {
	has := func(hosts []string, h string) bool {
		for _, x := range hosts {
			if x == h {
				return true
			}
		}
		return false
	}
	hosts := ListenerHosts("10.20.30.40:8080")
	for _, want := range []string{"localhost", "127.0.0.1", "::1", "10.20.30.40"} {
		if !has(hosts, want) {
			t.Errorf("ListenerHosts(10.20.30.40:8080) = %v, lacks %s", hosts, want)
		}
	}
	// On every interface, each interface's address is the listener's own.
	all := ListenerHosts(":8080")
	addrs := interfaceIPs()
	if len(addrs) == 0 {
		t.Skip("no interface addresses on this machine")
	}
	for _, ip := range addrs {
		if !has(all, ip) {
			t.Errorf("ListenerHosts(:8080) = %v, lacks the interface address %s", all, ip)
		}
	}
	if has(hosts, addrs[0]) && addrs[0] != "127.0.0.1" && addrs[0] != "::1" {
		t.Errorf("a listener on one address accepts another interface's %s", addrs[0])
	}
}
