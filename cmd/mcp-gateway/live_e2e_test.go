package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// The live traffic tests check what reaches a host while its request
// runs, or outside any request: change notifications, progress, the
// server requests (sampling, elicitation, roots) an upstream makes and
// the gateway relays, resource updates, and cancellation. They use the
// Go SDK client in both eras, server-everything from npm over stdio and
// Streamable HTTP, and the mcptest fakes for what server-everything
// cannot show.

// relaying returns u set to relay every server request: the gateway
// declares all three client capabilities to it and relays their requests.
func relaying(u config.Upstream) config.Upstream {
	u.Relay = []string{"sampling", "elicitation", "roots"}
	return u
}

// liveHost is a Go SDK client session through the gateway that records
// everything the gateway relays to it. It answers sampling with "answer
// for <name>" and elicitation with {"name": <name>}.
type liveHost struct {
	name string
	cs   *mcp.ClientSession

	progress         chan *mcp.ProgressNotificationParams
	toolsChanged     chan struct{}
	resourcesChanged chan struct{}
	updated          chan string
	// acks receives the filter of each subscriptions/listen stream the
	// gateway acknowledged (modern era only).
	acks chan mcp.NotificationSubscriptions

	mu sync.Mutex // guards the fields below
	// sampled and elicited are the texts of the sampling requests (first
	// message) and elicitation requests (message) the host received.
	sampled, elicited []string
	// progressSeen is every progress notification received.
	progressSeen []*mcp.ProgressNotificationParams
}

// push sends v without ever blocking the SDK's delivery goroutine; the
// channels are large enough for any test here.
func push[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

func newLiveHost(t *testing.T, url, era, name string, roots ...*mcp.Root) *liveHost {
	t.Helper()
	h := &liveHost{
		name:             name,
		progress:         make(chan *mcp.ProgressNotificationParams, 256),
		toolsChanged:     make(chan struct{}, 256),
		resourcesChanged: make(chan struct{}, 256),
		updated:          make(chan string, 256),
		acks:             make(chan mcp.NotificationSubscriptions, 16),
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "live-e2e-" + name, Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := ""
			if len(req.Params.Messages) > 0 {
				if c, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					text = c.Text
				}
			}
			h.mu.Lock()
			h.sampled = append(h.sampled, text)
			h.mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "live-e2e", Content: &mcp.TextContent{Text: "answer for " + name}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			h.mu.Lock()
			h.elicited = append(h.elicited, req.Params.Message)
			h.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progressSeen = append(h.progressSeen, req.Params)
			h.mu.Unlock()
			push(h.progress, req.Params)
		},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { push(h.toolsChanged, struct{}{}) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { push(h.resourcesChanged, struct{}{}) },
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			push(h.updated, req.Params.URI)
		},
	})
	client.AddRoots(roots...)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok {
					push(h.acks, p.Notifications)
				}
			}
			return next(ctx, method, req)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("%s: connecting in era %s: %v", name, era, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("%s: negotiated %s, want %s", name, got, era)
	}
	h.cs = cs
	return h
}

func (h *liveHost) modern() bool { return h.cs.InitializeResult().ProtocolVersion >= "2026-07-28" }

// awaitListen waits, for a modern host, until the gateway acknowledged a
// subscriptions/listen stream whose filter satisfies ok: a change that
// happens before that has nowhere to go. A legacy host's changes wait in
// its session's outbox, so there is nothing to wait for.
func (h *liveHost) awaitListen(ctx context.Context, t *testing.T, what string, ok func(mcp.NotificationSubscriptions) bool) {
	t.Helper()
	if !h.modern() {
		return
	}
	for {
		select {
		case n := <-h.acks:
			if ok(n) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("%s: the gateway never acknowledged a subscriptions/listen stream for %s", h.name, what)
		}
	}
}

func (h *liveHost) samplingRequests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.sampled...)
}

func (h *liveHost) elicitations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.elicited...)
}

func (h *liveHost) allProgress() []*mcp.ProgressNotificationParams {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), h.progressSeen...)
}

// await receives from ch, or fails the test when ctx ends first.
func await[T any](ctx context.Context, t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// drain empties ch of what an earlier step left there.
func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// allText joins the text contents of a tool result.
func allText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// callAll calls a tool and returns all its text; a tool error is an error.
func callAll(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	text := allText(res)
	if res.IsError {
		return text, fmt.Errorf("%s: isError: %s", name, text)
	}
	return text, nil
}

// everythingUpstream returns server-everything as the upstream
// "everything", over stdio or Streamable HTTP, relaying every server
// request. Each call starts a fresh server: server-everything keeps some
// state per session (the roots it fetched, the subscriber-updates
// toggle), and the gateway shares one upstream session among its hosts.
func everythingUpstream(t *testing.T, dir, transport string) config.Upstream {
	t.Helper()
	var u config.Upstream
	switch transport {
	case "stdio":
		u = nodeUpstream("everything", dir, []string{npmServer(dir, "server-everything"), "stdio"}, nil)
	case "streamable-http":
		u = httpUpstream("everything", startEverythingHTTP(t, dir))
		u.Required = true
	default:
		t.Fatalf("unknown transport %q", transport)
	}
	return relaying(u)
}

// TestLiveTrafficServerEverything relays server-everything's live traffic
// to a Go SDK client of each era, with server-everything over stdio and
// over Streamable HTTP (a legacy server either way: a modern host's calls
// go through the gateway's input_required translation).
//
// server-everything has no tool that changes its tool list at run time
// (its conditional tools are registered once, at initialization), so the
// list change checked here is its resource list: gzip-file-as-resource
// registers a session resource. TestLiveToolListChanged covers tool list
// changes with the mcptest fakes.
func TestLiveTrafficServerEverything(t *testing.T) {
	dir := interopDir(t)
	for _, transport := range []string{"stdio", "streamable-http"} {
		for _, era := range eras {
			t.Run(transport+"/"+era, func(t *testing.T) {
				cfg := config.Default()
				cfg.Upstreams = []config.Upstream{everythingUpstream(t, dir, transport)}
				url, _ := startGateway(t, cfg)
				root := &mcp.Root{URI: "file:///live/" + era, Name: "workspace " + era}
				h := newLiveHost(t, url, era, "host-"+era, root)

				t.Run("resources-list-changed", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					h.awaitListen(ctx, t, "resource list changes", func(n mcp.NotificationSubscriptions) bool { return n.ResourcesListChanged })
					drain(h.resourcesChanged)
					name := "live-" + era + ".txt.gz"
					data := "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("live traffic "+era))
					if _, err := callAll(ctx, h.cs, "everything__gzip-file-as-resource", map[string]any{"name": name, "data": data, "outputType": "resourceLink"}); err != nil {
						t.Fatalf("gzip-file-as-resource: %v", err)
					}
					want := "demo://resource/session/" + name
					for {
						await(ctx, t, h.resourcesChanged, "notifications/resources/list_changed after a session resource was registered")
						res, err := h.cs.ListResources(ctx, nil)
						if err != nil {
							t.Fatal(err)
						}
						for _, r := range res.Resources {
							if r.URI == want {
								return
							}
						}
						// A change notice that came before the gateway's
						// catalog held the resource: wait for the next.
					}
				})

				t.Run("progress", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					drain(h.progress)
					token := "progress-" + era
					params := &mcp.CallToolParams{Name: "everything__trigger-long-running-operation", Arguments: map[string]any{"duration": 0.6, "steps": 3}}
					params.SetProgressToken(token)
					res, err := h.cs.CallTool(ctx, params)
					if err != nil || res.IsError {
						t.Fatalf("trigger-long-running-operation: %v %v", err, res)
					}
					for step := 1; step <= 3; step++ {
						p := await(ctx, t, h.progress, fmt.Sprintf("progress step %d of 3", step))
						if fmt.Sprint(p.ProgressToken) != token || p.Progress != float64(step) || p.Total != 3 {
							t.Errorf("progress %d: token %v, progress %v of %v; want token %q, %d of 3", step, p.ProgressToken, p.Progress, p.Total, token, step)
						}
					}
				})

				t.Run("sampling", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					prompt := "a haiku for " + era
					got, err := callAll(ctx, h.cs, "everything__trigger-sampling-request", map[string]any{"prompt": prompt, "maxTokens": 50})
					if err != nil {
						t.Fatalf("trigger-sampling-request: %v", err)
					}
					if !strings.Contains(got, "answer for "+h.name) {
						t.Errorf("the tool result does not show the host's sampling answer %q:\n%s", "answer for "+h.name, got)
					}
					want := []string{"Resource trigger-sampling-request context: " + prompt}
					if diff := cmp.Diff(want, h.samplingRequests()); diff != "" {
						t.Errorf("sampling requests the host received (-want +got):\n%s", diff)
					}
				})

				t.Run("elicitation", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					got, err := callAll(ctx, h.cs, "everything__trigger-elicitation-request", map[string]any{})
					if err != nil {
						t.Fatalf("trigger-elicitation-request: %v", err)
					}
					if !strings.Contains(got, "- Name: "+h.name) {
						t.Errorf("the tool result does not show the host's elicitation answer (name %q):\n%s", h.name, got)
					}
					want := []string{"Please provide inputs for the following fields:"}
					if diff := cmp.Diff(want, h.elicitations()); diff != "" {
						t.Errorf("elicitations the host received (-want +got):\n%s", diff)
					}
				})

				t.Run("roots", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					got, err := callAll(ctx, h.cs, "everything__get-roots-list", map[string]any{})
					if err != nil {
						t.Fatalf("get-roots-list: %v", err)
					}
					if !strings.Contains(got, root.URI) || !strings.Contains(got, root.Name) {
						t.Errorf("get-roots-list does not show the host's root %s (%s):\n%s", root.URI, root.Name, got)
					}
				})

				t.Run("resources-updated", func(t *testing.T) {
					// server-everything sends updates for subscribed URIs once
					// when the toggle turns them on, then every 5 seconds.
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					res, err := h.cs.ListResources(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					uri := ""
					for _, r := range res.Resources {
						if strings.HasPrefix(r.URI, "demo://resource/static/document/") {
							uri = r.URI
							break
						}
					}
					if uri == "" {
						t.Fatalf("server-everything lists no static document resource: %d resources", len(res.Resources))
					}
					drain(h.updated)
					if err := h.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
						t.Fatalf("subscribing to %s: %v", uri, err)
					}
					h.awaitListen(ctx, t, "the subscription to "+uri, func(n mcp.NotificationSubscriptions) bool {
						return len(n.ResourceSubscriptions) == 1 && n.ResourceSubscriptions[0] == uri
					})
					for range 2 { // the tool toggles: at most two calls turn it on
						got, err := callAll(ctx, h.cs, "everything__toggle-subscriber-updates", map[string]any{})
						if err != nil {
							t.Fatalf("toggle-subscriber-updates: %v", err)
						}
						if strings.HasPrefix(got, "Started") {
							break
						}
					}
					for {
						got := await(ctx, t, h.updated, "notifications/resources/updated for "+uri)
						if got == uri {
							break
						}
						t.Errorf("resources/updated for %s, which the host did not subscribe to", got)
					}
					_ = h.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
				})
			})
		}
	}
}

// fakeUpstreams are the four kinds of upstream the mcptest fakes offer,
// each relaying every server request: a legacy and a modern server over
// stdio, and a legacy (session) and a modern (stateless) server over
// Streamable HTTP.
func fakeUpstreams(t *testing.T) []config.Upstream {
	t.Helper()
	legacyHTTP := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Name: "legacy-http", Versions: mcptest.LegacyVersions()}})
	modernHTTP := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Server: mcptest.ServerOptions{Name: "modern-http", Versions: mcptest.ModernVersions()}})
	return []config.Upstream{
		relaying(stdioUpstream("stdiolegacy", "echo-legacy", nil)),
		relaying(stdioUpstream("stdiomodern", "echo-modern", nil)),
		relaying(httpUpstream("httplegacy", legacyHTTP.URL)),
		relaying(httpUpstream("httpmodern", modernHTTP.URL)),
	}
}

// TestLiveToolListChanged adds a tool to each kind of upstream while a
// host of each era listens: the host hears notifications/tools/list_changed
// and then finds the tool in tools/list.
func TestLiveToolListChanged(t *testing.T) {
	cfg := config.Default()
	cfg.Upstreams = fakeUpstreams(t)
	url, _ := startGateway(t, cfg)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			h := newLiveHost(t, url, era, "host-"+era)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h.awaitListen(ctx, t, "tool list changes", func(n mcp.NotificationSubscriptions) bool { return n.ToolsListChanged })
			for _, u := range cfg.Upstreams {
				t.Run(u.Name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
					defer cancel()
					drain(h.toolsChanged)
					tool := "added_" + strings.ReplaceAll(era, "-", "_")
					if _, err := callText(ctx, h.cs, u.Name+"__addtool", map[string]any{"name": tool}); err != nil {
						t.Fatalf("addtool: %v", err)
					}
					want := u.Name + "__" + tool
					for {
						await(ctx, t, h.toolsChanged, "notifications/tools/list_changed after "+u.Name+" added a tool")
						res, err := h.cs.ListTools(ctx, nil)
						if err != nil {
							t.Fatal(err)
						}
						for _, tl := range res.Tools {
							if tl.Name == want {
								if got, err := callText(ctx, h.cs, want, nil); err != nil || got != "ok" {
									t.Errorf("calling the added tool: %q, %v", got, err)
								}
								return
							}
						}
					}
				})
			}
		})
	}
}

// TestLiveListChangedAfterResourceSubscription changes the subscriptions
// the gateway holds on each kind of upstream (a host subscribes to a
// resource, then unsubscribes: on a modern upstream each change replaces
// the gateway's subscriptions/listen stream), then adds a tool: the host
// must still hear of the change.
func TestLiveListChangedAfterResourceSubscription(t *testing.T) {
	// Every fake lists the same URIs, so each gets a gateway of its own.
	for _, u := range fakeUpstreams(t) {
		t.Run(u.Name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Upstreams = []config.Upstream{u}
			url, _ := startGateway(t, cfg)
			h := newLiveHost(t, url, eras[0], "host")
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			const uri = "test://static/hello"
			if err := h.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("subscribing to %s: %v", uri, err)
			}
			if err := h.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatalf("unsubscribing from %s: %v", uri, err)
			}
			drain(h.toolsChanged)
			if _, err := callText(ctx, h.cs, u.Name+"__addtool", map[string]any{"name": "added_later"}); err != nil {
				t.Fatalf("addtool: %v", err)
			}
			want := u.Name + "__added_later"
			for {
				await(ctx, t, h.toolsChanged, "notifications/tools/list_changed after "+u.Name+" added a tool")
				res, err := h.cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, tl := range res.Tools {
					if tl.Name == want {
						return
					}
				}
			}
		})
	}
}

// TestLiveTwoHostsOneUpstream runs two hosts against one shared upstream
// session: two legacy hosts, as the contract promises, and also two
// modern hosts and one of each, whose calls to this legacy upstream the
// gateway keeps running while it asks them for input.
//
// Progress: both hosts use progress token 1 at the same time, and each
// must hear only its own. Sampling: each host must get its own request.
// On Streamable HTTP the request travels on its call's own response
// stream; on stdio nothing in it names the call, so the gateway lets the
// calls of one sampling host at a time run (the host gate), and the
// request is that host's.
func TestLiveTwoHostsOneUpstream(t *testing.T) {
	legacyHTTP := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Name: "legacy-http", Versions: mcptest.LegacyVersions()}})
	for _, tc := range []struct {
		name     string
		upstream config.Upstream
		// gated: the calls of the two hosts take turns (stdio).
		gated bool
	}{
		{"stdio", relaying(stdioUpstream("shared", "echo-legacy", nil)), true},
		{"streamable-http", relaying(httpUpstream("shared", legacyHTTP.URL)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Upstreams = []config.Upstream{tc.upstream}
			url, _ := startGateway(t, cfg)
			for _, pair := range []struct {
				name string
				eras [2]string
			}{
				{"legacy-hosts", [2]string{eras[0], eras[0]}},
				{"modern-hosts", [2]string{eras[1], eras[1]}},
				{"mixed-hosts", [2]string{eras[0], eras[1]}},
			} {
				t.Run(pair.name, func(t *testing.T) {
					testTwoHosts(t, url, tc.name+"-"+pair.name, pair.eras, tc.gated)
				})
			}
		})
	}
}

// testTwoHosts is TestLiveTwoHostsOneUpstream for two hosts of the eras
// given, hosts A and B, on the upstream "shared" behind url. gated says
// that the two hosts' calls take turns.
func testTwoHosts(t *testing.T, url, key string, hostEras [2]string, gated bool) {
	hosts := []*liveHost{newLiveHost(t, url, hostEras[0], "A"), newLiveHost(t, url, hostEras[1], "B")}
	// The observer declares no capability the gateway relays: its calls
	// never wait for the hosts' turns.
	observerClient := mcp.NewClient(&mcp.Implementation{Name: "observer", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	observer, err := observerClient.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = observer.Close() })
	const rounds = 20

	t.Run("progress", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for round := 0; round < rounds && !t.Failed(); round++ {
			var wg sync.WaitGroup
			for _, h := range hosts {
				wg.Go(func() {
					text := fmt.Sprintf("%s round %d", h.name, round)
					params := &mcp.CallToolParams{Name: "shared__progress", Arguments: map[string]any{"text": text}}
					params.SetProgressToken(1)
					res, err := h.cs.CallTool(ctx, params)
					if err != nil || res.IsError || allText(res) != text+"\n" {
						t.Errorf("%s: progress(%q) = %v, %v", h.name, text, res, err)
						return
					}
					var p *mcp.ProgressNotificationParams
					select {
					case p = <-h.progress:
					case <-ctx.Done():
						t.Errorf("%s: no progress for %q", h.name, text)
						return
					}
					if p.Message != text || fmt.Sprint(p.ProgressToken) != "1" {
						t.Errorf("%s got progress %q with token %v; want its own, %q with token 1", h.name, p.Message, p.ProgressToken, text)
					}
				})
			}
			wg.Wait()
		}
		for _, h := range hosts {
			for _, p := range h.allProgress() {
				if !strings.HasPrefix(p.Message, h.name+" ") {
					t.Errorf("%s received another host's progress: %q", h.name, p.Message)
				}
			}
		}
	})

	// checkSampling checks what host h got from its sample call asking
	// with text, and reports whether it was its own answer.
	checkSampling := func(t *testing.T, h *liveHost, text, got string, err error) bool {
		t.Helper()
		switch {
		case err != nil:
			t.Errorf("%s: sample: %v", h.name, err)
		case got == "answer for "+h.name:
			return true
		default:
			t.Errorf("%s: sample(%q) = %q; want %q", h.name, text, got, "answer for "+h.name)
		}
		return false
	}
	checkOwnRequests := func(t *testing.T) {
		t.Helper()
		for _, h := range hosts {
			for _, s := range h.samplingRequests() {
				if !strings.HasPrefix(s, "from "+h.name+" ") {
					t.Errorf("%s received another host's sampling request: %q", h.name, s)
				}
			}
		}
	}

	t.Run("sampling-at-once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var mu sync.Mutex
		answered := 0
		for round := 0; round < rounds && !t.Failed(); round++ {
			var wg sync.WaitGroup
			for _, h := range hosts {
				wg.Go(func() {
					text := fmt.Sprintf("from %s round %d", h.name, round)
					got, err := callText(ctx, h.cs, "shared__sample", map[string]any{"text": text})
					if checkSampling(t, h, text, got, err) {
						mu.Lock()
						answered++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		}
		checkOwnRequests(t)
		if answered != 2*rounds {
			t.Errorf("%d of %d concurrent sampling requests reached their own host", answered, 2*rounds)
		}
	})

	// While A waits in a call, B's sampling request is plainly B's: on
	// Streamable HTTP at once, on stdio once A's turn is over.
	t.Run("sampling-beside-a-waiting-call", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		a, b := hosts[0], hosts[1]
		key := "beside-" + key
		blocked := make(chan error, 1)
		go func() {
			_, err := callText(ctx, a.cs, "shared__block", map[string]any{"key": key})
			blocked <- err
		}()
		if _, err := callText(ctx, observer, "shared__waiting", map[string]any{"key": key, "n": 1}); err != nil {
			t.Fatalf("waiting for A's call: %v", err)
		}
		before := len(a.samplingRequests())
		text := "from B beside A"
		type sampled struct {
			got string
			err error
		}
		bDone := make(chan sampled, 1)
		go func() {
			got, err := callText(ctx, b.cs, "shared__sample", map[string]any{"text": text})
			bDone <- sampled{got, err}
		}()
		if !gated {
			s := <-bDone
			checkSampling(t, b, text, s.got, s.err)
		}
		if _, err := callText(ctx, observer, "shared__release", map[string]any{"key": key}); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := await(ctx, t, blocked, "A's blocked call to end"); err != nil {
			t.Errorf("A's blocked call: %v", err)
		}
		if gated {
			s := <-bDone
			checkSampling(t, b, text, s.got, s.err)
		}
		if after := a.samplingRequests(); len(after) != before {
			t.Errorf("A, whose call was only waiting, received B's sampling request: %q", after[before:])
		}
		checkOwnRequests(t)
	})
}

// TestLiveResourceUpdatedOnlyToSubscribers has two hosts subscribe to the
// same resources of each kind of upstream; the upstream subscription is
// shared. An update reaches both; once A unsubscribes from one resource,
// its updates reach B only, while A still hears of the other.
func TestLiveResourceUpdatedOnlyToSubscribers(t *testing.T) {
	// Every fake lists the same URIs, so each gets a gateway of its own.
	for _, u := range fakeUpstreams(t) {
		t.Run(u.Name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Upstreams = []config.Upstream{u}
			url, _ := startGateway(t, cfg)
			toucher := connect(t, url, eras[0])
			for _, pair := range [][2]string{{eras[0], eras[0]}, {eras[1], eras[1]}, {eras[0], eras[1]}, {eras[1], eras[0]}} {
				t.Run(pair[0]+"+"+pair[1], func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					defer cancel()
					a, b := newLiveHost(t, url, pair[0], "A"), newLiveHost(t, url, pair[1], "B")
					const hello, world = "test://static/hello", "test://static/world"
					for _, h := range []*liveHost{a, b} {
						for _, uri := range []string{hello, world} {
							if err := h.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
								t.Fatalf("%s: subscribing to %s: %v", h.name, uri, err)
							}
							h.awaitListen(ctx, t, "the subscription to "+uri, func(n mcp.NotificationSubscriptions) bool {
								return len(n.ResourceSubscriptions) == 1 && n.ResourceSubscriptions[0] == uri
							})
						}
					}
					touch := func(uri string) {
						t.Helper()
						if _, err := callText(ctx, toucher, u.Name+"__touch", map[string]any{"uri": uri}); err != nil {
							t.Fatalf("touch %s: %v", uri, err)
						}
					}
					touch(hello)
					for _, h := range []*liveHost{a, b} {
						if got := await(ctx, t, h.updated, h.name+"'s update of "+hello); got != hello {
							t.Errorf("%s: resources/updated for %s, want %s", h.name, got, hello)
						}
					}
					if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: hello}); err != nil {
						t.Fatalf("A: unsubscribing: %v", err)
					}
					touch(hello)
					touch(world)
					// The upstream (the SDK's server) may send the two
					// updates in either order: B must get both.
					gotB := []string{await(ctx, t, b.updated, "B's first update"), await(ctx, t, b.updated, "B's second update")}
					slices.Sort(gotB)
					if want := []string{hello, world}; !slices.Equal(gotB, want) {
						t.Errorf("B: resources/updated for %v, want %v (A's unsubscription must not end B's)", gotB, want)
					}
					// A legacy host's unsubscription is a request the gateway
					// has handled when it returns. A modern host unsubscribes
					// by closing its listen stream, which the gateway learns
					// of when the connection closes: an update sent before
					// then may still reach it.
					for {
						got := await(ctx, t, a.updated, "A's update of "+world)
						if got == world {
							break
						}
						if pair[0] != eras[1] {
							t.Errorf("A: resources/updated for %s after unsubscribing from it, want only %s", got, world)
							break
						}
					}
				})
			}
		})
	}
}

// TestLiveCancellation cancels a host's blocked call and asks the
// upstream whether it saw the cancellation: a legacy host sends
// notifications/cancelled (the SDK does when the call's context ends), a
// modern host closes its response stream. Every kind of upstream must
// see its call end by cancellation; upstreams that are told with
// notifications/cancelled must be told the id of that very call.
func TestLiveCancellation(t *testing.T) {
	cfg := config.Default()
	cfg.Upstreams = fakeUpstreams(t)
	url, _ := startGateway(t, cfg)
	observer := connect(t, url, eras[0])
	for _, era := range eras {
		for _, u := range cfg.Upstreams {
			t.Run(era+"/"+u.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				host := connect(t, url, era)
				key := "cancel-" + era
				callCtx, cancelCall := context.WithCancel(ctx)
				defer cancelCall()
				ended := make(chan error, 1)
				go func() {
					_, err := callText(callCtx, host, u.Name+"__block", map[string]any{"key": key})
					ended <- err
				}()
				if _, err := callText(ctx, observer, u.Name+"__waiting", map[string]any{"key": key, "n": 1}); err != nil {
					t.Fatalf("the block call never reached the upstream: %v", err)
				}
				cancelCall()
				if err := await(ctx, t, ended, "the cancelled call to return"); err == nil {
					t.Error("the cancelled call succeeded")
				}
				if _, err := callText(ctx, observer, u.Name+"__aborted", map[string]any{"key": key, "n": 1}); err != nil {
					t.Fatalf("the upstream never saw the call cancelled: %v", err)
				}
				if u.Name == "httpmodern" {
					return // told by the closed stream, not by a notification
				}
				got, err := callText(ctx, observer, u.Name+"__cancellations", map[string]any{"key": key})
				if err != nil {
					t.Fatalf("cancellations: %v", err)
				}
				var seen struct{ Block, Cancelled []json.RawMessage }
				if err := json.Unmarshal([]byte(got), &seen); err != nil {
					t.Fatalf("cancellations %s: %v", got, err)
				}
				if len(seen.Block) != 1 {
					t.Fatalf("the upstream saw %d block calls on %s, want 1: %s", len(seen.Block), key, got)
				}
				found := false
				for _, id := range seen.Cancelled {
					found = found || string(id) == string(seen.Block[0])
				}
				if !found {
					t.Errorf("no notifications/cancelled named the block call %s: %s", seen.Block[0], got)
				}
			})
		}
	}
}

// TestLiveCancelledByNotification isolates notifications/cancelled: the
// SDK client also aborts its POST when a call's context ends, which alone
// cancels the call. This legacy host, spoken to by hand, keeps the call's
// response stream open and only sends the notification.
func TestLiveCancelledByNotification(t *testing.T) {
	cfg := config.Default()
	cfg.Upstreams = fakeUpstreams(t)
	url, _ := startGateway(t, cfg)
	observer := connect(t, url, eras[0])
	for _, u := range cfg.Upstreams {
		t.Run(u.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := "notified-" + u.Name
			session := rawInitialize(ctx, t, url)
			callCtx, cancelCall := context.WithCancel(ctx)
			defer cancelCall()
			answered := make(chan string, 1)
			go func() {
				resp, err := rawPost(callCtx, url, session, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+u.Name+`__block","arguments":{"key":"`+key+`"}}}`)
				if err != nil {
					answered <- "error: " + err.Error()
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				answered <- string(body)
			}()
			if _, err := callText(ctx, observer, u.Name+"__waiting", map[string]any{"key": key, "n": 1}); err != nil {
				t.Fatalf("the block call never reached the upstream: %v", err)
			}
			resp, err := rawPost(ctx, url, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"the user changed their mind"}}`)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("notifications/cancelled: HTTP %d, want 202", resp.StatusCode)
			}
			if _, err := callText(ctx, observer, u.Name+"__aborted", map[string]any{"key": key, "n": 1}); err != nil {
				t.Fatalf("the upstream never saw the call cancelled: %v", err)
			}
			// The spec says the receiver SHOULD NOT answer a cancelled
			// request; whatever comes, the stream must end.
			body := await(ctx, t, answered, "the cancelled call's response stream to end")
			t.Logf("the cancelled call's stream carried: %q", body)
		})
	}
}

// rawInitialize opens a legacy session by hand and returns its id.
func rawInitialize(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	resp, err := rawPost(ctx, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, session)
	}
	resp, err = rawPost(ctx, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Mcp-Session-Id", session)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return session
}

func rawPost(ctx context.Context, url, session, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return http.DefaultClient.Do(req)
}

// TestLiveHostsThatDisappear has 100 hosts of both eras start a blocking
// call and go away: half cancel the call (a legacy host then sends
// notifications/cancelled, a modern one closes the response stream), half
// vanish as a crashed host does, their connections dropped without a
// word. (A graceful ClientSession.Close would not do: the SDK waits for
// the calls in flight to finish first.) Every upstream call must end as
// cancelled, and nothing may be left running once the gateway stops.
func TestLiveHostsThatDisappear(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Run("hosts", func(t *testing.T) {
		cfg := config.Default()
		cfg.Upstreams = fakeUpstreams(t)
		url, _ := startGateway(t, cfg)
		observer := connect(t, url, eras[0])
		for _, u := range cfg.Upstreams {
			t.Run(u.Name, func(t *testing.T) {
				const hosts = 100
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				key := "gone-" + u.Name
				type host struct {
					cs     *mcp.ClientSession
					net    *hostConns
					cancel context.CancelFunc
				}
				all := make([]*host, hosts)
				var wg sync.WaitGroup
				for i := range all {
					wg.Go(func() {
						h := &host{net: &hostConns{}}
						client := mcp.NewClient(&mcp.Implementation{Name: "live-e2e", Version: "1"}, nil)
						transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: h.net.client()}
						cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: eras[i%2]})
						if err != nil {
							t.Errorf("host %d: connecting: %v", i, err)
							h.net.vanish()
							return
						}
						h.cs = cs
						all[i] = h
					})
				}
				wg.Wait()
				defer func() {
					for _, h := range all {
						if h != nil {
							h.net.vanish()
							_ = h.cs.Close()
						}
					}
				}()
				if t.Failed() {
					t.FailNow()
				}
				ended := make(chan error, hosts)
				for _, h := range all {
					callCtx, cancelCall := context.WithCancel(ctx)
					h.cancel = cancelCall
					go func() {
						_, err := callText(callCtx, h.cs, u.Name+"__block", map[string]any{"key": key})
						ended <- err
					}()
				}
				if _, err := callText(ctx, observer, u.Name+"__waiting", map[string]any{"key": key, "n": hosts}); err != nil {
					t.Fatalf("the %d block calls never all reached the upstream: %v", hosts, err)
				}
				for i, h := range all {
					if i%4 < 2 {
						h.cancel() // hosts 0 and 1 mod 4 (both eras) cancel
					} else {
						h.net.vanish() // 2 and 3 mod 4 vanish
					}
				}
				if _, err := callText(ctx, observer, u.Name+"__aborted", map[string]any{"key": key, "n": hosts}); err != nil {
					t.Fatalf("the upstream did not see all %d calls cancelled: %v", hosts, err)
				}
				for i := range hosts {
					if err := await(ctx, t, ended, fmt.Sprintf("call %d of %d to return", i+1, hosts)); err == nil {
						t.Errorf("a call of a host that went away succeeded")
					}
				}
				for _, h := range all {
					h.cancel()
				}
			})
		}
	})
	// The gateway, its upstreams and every host are closed: nothing they
	// started may still run.
	goleak.VerifyNone(t, ignore)
}

// hostConns holds a host's TCP connections, so that the host can vanish
// as a crashed process does: every connection closed, none opened again.
type hostConns struct {
	mu    sync.Mutex // guards the fields below
	conns []net.Conn
	gone  bool
}

// client returns an HTTP client whose connections h holds.
func (h *hostConns) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: h.dial}}
}

func (h *hostConns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		conn.Close()
		return nil, errors.New("the host is gone")
	}
	h.conns = append(h.conns, conn)
	return conn, nil
}

// vanish closes every connection of the host and refuses new ones.
func (h *hostConns) vanish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone = true
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}
