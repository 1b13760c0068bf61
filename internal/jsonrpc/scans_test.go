package jsonrpc_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/server"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// counter counts the walks over one host request's bytes (the first
// buffer walked after arm), all the walks the gateway makes meanwhile
// (of the request or any copy of it), and the encodings of requests to
// upstreams. Before the typed request (6867155) the same tools/call was
// walked 11 to 27 times and copied 4 to 9 times (docs/performance.md).
type counter struct {
	mu      sync.Mutex
	armed   bool
	body    []byte
	scans   int
	encodes []string
	// allWalks counts every walk the gateway makes of the request or of
	// copies of it (the fake server's and the answer's excluded).
	allWalks int
}

func (c *counter) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.body, c.scans, c.encodes, c.allWalks = true, nil, 0, nil, 0
}

func (c *counter) scan(data []byte) {
	walk := gatewayWalk()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed || len(data) == 0 {
		return
	}
	if walk {
		c.allWalks++
	}
	if c.body == nil {
		c.body = data // the first walk: the server decoding the POST
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(c.body)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if p >= start && p < start+uintptr(len(c.body)) {
		c.scans++
	}
}

func (c *counter) encode(o *jsonrpc.Outgoing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed {
		c.encodes = append(c.encodes, o.Method)
	}
}

// TestToolsCallWalkedOnceEncodedOnce: a host's tools/call, through the
// HTTP endpoint, the router and the upstream client to a Streamable
// HTTP server, is walked once (the strict decode at the boundary; nothing
// after it looks at the request's bytes again) and its request to the
// upstream encoded once, whatever the two sides' eras, with a progress
// token to remap. The same call through search mode's call_tool is
// walked once more (call_tool's own arguments are read) and still
// encoded once: the tools/call it runs is built once, not re-decoded.
func TestToolsCallWalkedOnceEncodedOnce(t *testing.T) {
	var c counter
	defer jsonrpc.SetHooks(c.scan, c.encode)()
	for _, upEra := range []string{"legacy", "modern"} {
		opts := &mcptest.HTTPOptions{Stateless: true}
		if upEra == "legacy" {
			opts = &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}
		}
		up := mcptest.NewStreamableServer(t, opts)
		rt, err := router.New(&router.Options{ListWait: -1, Rules: policy.Rules{Mode: config.ModeSearch}, Upstreams: []router.UpstreamConfig{{Name: "up",
			Connect: func(o router.ConnectOptions) (router.Upstream, error) {
				return upstream.New(&upstream.Options{Name: "up", URL: up.URL, OnNotification: o.Notify, OnRequest: o.Request})
			}}}})
		if err != nil {
			t.Fatal(err)
		}
		rt.Start(context.Background())
		t.Cleanup(func() { _ = rt.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.WaitStarted(ctx); err != nil {
			t.Fatal(err)
		}
		srv := server.New(rt, &server.Options{})
		t.Cleanup(srv.Close)
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		post := func(h http.Header, body string) (http.Header, string) {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
			req.Header = h.Clone()
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.Header, string(b)
		}
		legacy := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
		rh, _ := post(http.Header{}, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
		legacy.Set("Mcp-Session-Id", rh.Get("Mcp-Session-Id"))
		for _, call := range []struct {
			name, params string
			walks        int
		}{
			{"up__echo", `"name":"up__echo","arguments":{"text":"walked once"}`, 1},
			{"call_tool", `"name":"call_tool","arguments":{"name":"up__echo","arguments":{"text":"walked once"}}`, 2},
		} {
			modern := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {call.name}}
			for _, host := range []struct {
				era    string
				header http.Header
				meta   string
			}{
				{"legacy", legacy, `"_meta":{"progressToken":"p-1"}`},
				{"modern", modern, `"_meta":{"progressToken":"p-1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`},
			} {
				t.Run(call.name+", "+host.era+" host, "+upEra+" upstream", func(t *testing.T) {
					c.arm()
					_, answer := post(host.header, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+call.params+`,`+host.meta+`}}`)
					if !strings.Contains(answer, "walked once") {
						t.Fatalf("tools/call: %s", answer)
					}
					c.mu.Lock()
					defer c.mu.Unlock()
					c.armed = false
					if c.scans != call.walks || c.allWalks != call.walks {
						t.Errorf("the host's request was walked %d times, and it or a copy %d times; want %d", c.scans, c.allWalks, call.walks)
					}
					if !bytes.Contains(c.body, []byte("walked once")) {
						t.Errorf("the first walk was of %q, not the host's request", c.body)
					}
					if len(c.encodes) != 1 || c.encodes[0] != "tools/call" {
						t.Errorf("requests encoded for the upstream: %v, want one tools/call", c.encodes)
					}
				})
			}
		}
	}
}

// gatewayWalk reports whether a walk is the gateway's work on the
// request: not the fake server's decoding, nor the client's decoding of
// the answer.
func gatewayWalk() bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		for _, skip := range []string{"mcptest", "(*httpWire).answer", "(*httpWire).readStream", "(*httpWire).getStream", "(*httpWire).getLoop", "go-sdk"} {
			if strings.Contains(f.Function, skip) {
				return false
			}
		}
		if !more {
			return true
		}
	}
}
