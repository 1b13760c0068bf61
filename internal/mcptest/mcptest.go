// Package mcptest provides fake MCP servers for tests across the project.
// It is imported only by _test.go files.
//
// Four kinds of fakes:
//
//   - NewServer builds a real server from the official Go SDK with a fixed
//     set of tools, prompts and resources (see below). Serve it in process
//     over Streamable HTTP with NewStreamableServer, over the deprecated
//     HTTP+SSE transport with NewSSEServer, or over stdio in a child
//     process.
//   - Stdio fakes run in a child process made by re-executing the test
//     binary; they are listed on StdioCommand.
//   - Scripted is a raw HTTP server whose answers each test writes, for
//     the cases a correct server never produces: expiring sessions, odd
//     status codes, bodies that are not MCP, silence.
//   - RawServer hands each TCP connection to the test, for peers that
//     break HTTP itself: endless headers, floods of interim answers,
//     bytes nobody asked for; it counts the open connections.
//
// HandlerClient serves any http.Handler to an HTTP client in the same
// process, with no socket, so that tests of timeouts and backoff can run
// under testing/synctest with its fake clock.
//
// A package that uses stdio fakes calls MaybeServeStdio first thing in its
// TestMain, and launches a fake with the command, arguments and
// environment StdioCommand returns (in a gateway config: command, args and
// env of a stdio upstream):
//
//	func TestMain(m *testing.M) {
//		mcptest.MaybeServeStdio()
//		os.Exit(m.Run())
//	}
//
//	command, args, env := mcptest.StdioCommand("echo")
//
// The tools every NewServer has (arguments in braces):
//
//   - echo {text}: returns text as its text content.
//   - add {a, b}: returns the integer sum as text.
//   - big {size}: returns a text content of size bytes ('x' repeated).
//   - block {key}: waits until release is called with the same key, or the
//     call is cancelled; returns "released".
//   - release {key}: releases every block call waiting on key; returns the
//     number released.
//   - waiting {key, n}: returns once n block calls wait on key.
//   - barrier {key, n}: returns once n barrier calls have arrived on key,
//     so n calls that must all be in flight at once finish together.
//   - progress {text}: sends a notifications/progress when the call carries
//     a progress token, then returns text.
//   - roots: asks the client for roots/list and returns the JSON answer or
//     the error text (legacy sessions only: modern servers may not send
//     requests).
//   - sample {text}: asks the client for sampling/createMessage with text
//     as the user message and returns the text of the answer, or the error
//     text (legacy sessions only).
//   - ask {message}: asks the client for a name: on a modern (2026-07-28)
//     request with an input_required result (an elicitation under the
//     key "name", and requestState "ask-state-<message>"), whose retry
//     returns "<action> <content> state=<requestState>"; on a legacy
//     session as elicit does.
//   - elicit {message}: asks the client for elicitation/create with message
//     and a schema of one string property, name; returns the action, a
//     space and the content as JSON ("accept {"name":"Ada"}"), or the error
//     text (legacy sessions only, and only when the client declared the
//     elicitation capability in initialize).
//   - capabilities: returns, as JSON, the client capabilities the request
//     carries (modern) or the client declared in initialize (legacy);
//     "null" when there are none.
//   - addtool {name}: adds a tool called name (which returns "ok"), so that
//     the server sends notifications/tools/list_changed (legacy sessions
//     get it unasked; modern clients on a subscriptions/listen stream that
//     asked for it).
//   - touch {uri}: sends notifications/resources/updated for uri to the
//     clients subscribed to it (resources/subscribe, or the
//     resourceSubscriptions of subscriptions/listen).
//   - cancellations {key}: waits until the server has received a
//     notifications/cancelled, then returns {"block":[...],"cancelled":[...]}:
//     the JSON-RPC ids of the block calls on key and the requestIds of
//     every notifications/cancelled received, in order.
//   - aborted {key, n}: returns once n block calls on key have ended
//     because their request was cancelled (their context ended: a
//     notifications/cancelled, or a closed modern HTTP response stream).
//   - headers {region, count, opts: {dry}}: its input schema marks region,
//     count and opts.dry with x-mcp-header (Region, Count, Dry); returns
//     its arguments as text.
//   - LongToolName (longer than 64 characters) and "dotted.name": return
//     "ok".
//
// Prompts: greet {name}. Resources: test://static/hello ("hello") and
// test://static/world ("world"); the template test://items/{id} returns
// "item <id>". The server accepts resource subscriptions (it declares
// resources.subscribe).
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// LongToolName is the name of a tool longer than the 64 characters a
// gateway may expose.
const LongToolName = "a_tool_with_a_remarkably_long_name_that_exceeds_the_sixty_four_character_limit"

// LegacyVersions returns the handshake-era protocol versions, newest first.
func LegacyVersions() []string { return []string{"2025-11-25", "2025-06-18", "2025-03-26"} }

// ModernVersions returns the per-request-metadata protocol versions.
func ModernVersions() []string { return []string{"2026-07-28"} }

// ServerOptions configures NewServer. The zero value is a dual-era server
// named "mcptest".
type ServerOptions struct {
	// Name is the server's implementation name; "" means "mcptest".
	Name string
	// Versions restricts the protocol versions the server accepts (for
	// example LegacyVersions() or ModernVersions()); nil means every
	// version the SDK supports.
	Versions []string
	// PageSize is the list page size; 0 means the SDK default.
	PageSize int
	// Instructions are returned from initialize and server/discover.
	Instructions string
	// NotifyOnInitialized makes the server send
	// notifications/tools/list_changed to a legacy client as soon as the
	// client's notifications/initialized arrives, as some servers do
	// (server-everything, for one): a client that is not yet listening
	// loses it.
	NotifyOnInitialized bool
}

// NewServer returns an SDK server with the tools, prompts and resources
// listed in the package documentation. opts may be nil.
func NewServer(opts *ServerOptions) *mcp.Server {
	s, _ := newServer(opts)
	return s
}

// newServer is NewServer that also returns the state of the waiting
// tools, so that in-process servers can end them when the test ends.
func newServer(opts *ServerOptions) (*mcp.Server, *gates) {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "mcptest"
	}
	var send mcp.MethodHandler // the SDK's own sender, for notifications it has no method for
	sopts := &mcp.ServerOptions{
		PageSize:                  o.PageSize,
		Instructions:              o.Instructions,
		SupportedProtocolVersions: o.Versions,
		// Accept every subscription: the SDK tracks them itself.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	}
	if o.NotifyOnInitialized {
		sopts.InitializedHandler = func(ctx context.Context, req *mcp.InitializedRequest) {
			_, _ = send(ctx, "notifications/tools/list_changed", &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: req.Session, Params: &mcp.ToolListChangedParams{}})
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: "1.0.0"}, sopts)
	s.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		send = next
		return next
	})
	g := addTools(s)
	s.AddPrompt(&mcp.Prompt{
		Name:        "greet",
		Description: "greets someone",
		Arguments:   []*mcp.PromptArgument{{Name: "name", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
			Role:    "user",
			Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"]},
		}}}, nil
	})
	for _, word := range []string{"hello", "world"} {
		uri := "test://static/" + word
		s.AddResource(&mcp.Resource{URI: uri, Name: word, MIMEType: "text/plain"},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: word}}}, nil
			})
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://items/{id}", Name: "item", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimPrefix(req.Params.URI, "test://items/")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + id}}}, nil
		})
	return s, g
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func schema(props string) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
}

// args decodes a tool call's arguments into v.
func args(req *mcp.CallToolRequest, v any) error {
	if len(req.Params.Arguments) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Params.Arguments, v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

func addTools(s *mcp.Server) *gates {
	g := newGates()
	s.AddTool(&mcp.Tool{Name: "echo", Description: "returns its text argument", InputSchema: schema(`"text":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			return text(a.Text), nil
		})
	s.AddTool(&mcp.Tool{Name: "add", Description: "adds two integers", InputSchema: schema(`"a":{"type":"integer"},"b":{"type":"integer"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ A, B int64 }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			return text(strconv.FormatInt(a.A+a.B, 10)), nil
		})
	s.AddTool(&mcp.Tool{Name: "big", Description: "returns size bytes of text", InputSchema: schema(`"size":{"type":"integer"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Size int }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			return text(strings.Repeat("x", a.Size)), nil
		})
	s.AddTool(&mcp.Tool{Name: "block", Description: "waits until released or cancelled", InputSchema: schema(`"key":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Key string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if err := g.block(ctx, a.Key); err != nil {
				return nil, err
			}
			return text("released"), nil
		})
	s.AddTool(&mcp.Tool{Name: "sleep", Description: "returns after ms milliseconds (a long job), or when cancelled", InputSchema: schema(`"ms":{"type":"integer"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Ms int }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			t := time.NewTimer(time.Duration(a.Ms) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text(fmt.Sprintf("slept %d ms", a.Ms)), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	s.AddTool(&mcp.Tool{Name: "release", Description: "releases blocked calls", InputSchema: schema(`"key":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Key string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			return text(strconv.Itoa(g.release(a.Key))), nil
		})
	s.AddTool(&mcp.Tool{Name: "waiting", Description: "returns once n block calls wait", InputSchema: schema(`"key":{"type":"string"},"n":{"type":"integer"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Key string
				N   int
			}
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if err := g.waitBlocked(ctx, a.Key, a.N); err != nil {
				return nil, err
			}
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "barrier", Description: "returns once n calls have arrived", InputSchema: schema(`"key":{"type":"string"},"n":{"type":"integer"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Key string
				N   int
			}
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if err := g.barrier(ctx, a.Key, a.N); err != nil {
				return nil, err
			}
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "progress", Description: "reports progress, then returns text", InputSchema: schema(`"text":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 1, Message: a.Text}); err != nil {
					return nil, err
				}
			}
			return text(a.Text), nil
		})
	s.AddTool(&mcp.Tool{Name: "roots", Description: "asks the client for its roots", InputSchema: schema(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return text("error: " + err.Error()), nil
			}
			b, _ := json.Marshal(res)
			return text(string(b)), nil
		})
	s.AddTool(&mcp.Tool{Name: "sample", Description: "asks the client for a sampling answer", InputSchema: schema(`"text":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Text string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				MaxTokens: 100,
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Text}}},
			})
			if err != nil {
				return text("error: " + err.Error()), nil
			}
			if t, ok := res.Content.(*mcp.TextContent); ok {
				return text(t.Text), nil
			}
			return text(fmt.Sprintf("error: content %T", res.Content)), nil
		})
	s.AddTool(&mcp.Tool{Name: "elicit", Description: "asks the client for a name (after calls of release with after_key, when given)", InputSchema: schema(`"message":{"type":"string"},"after_key":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Message  string
				AfterKey string `json:"after_key"`
			}
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if a.AfterKey != "" {
				if err := g.block(ctx, a.AfterKey); err != nil {
					return nil, err
				}
			}
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: a.Message,
				RequestedSchema: map[string]any{
					"type":       "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}},
				},
			})
			if err != nil {
				return text("error: " + err.Error()), nil
			}
			content, _ := json.Marshal(res.Content)
			return text(res.Action + " " + string(content)), nil
		})
	s.AddTool(&mcp.Tool{Name: "ask", Description: "asks the client for a name, in its era's way", InputSchema: schema(`"message":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Message string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
			if ip := req.Session.InitializeParams(); ip == nil || ip.ProtocolVersion < "2026-07-28" {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: a.Message, RequestedSchema: schema})
				if err != nil {
					return text("error: " + err.Error()), nil
				}
				content, _ := json.Marshal(res.Content)
				return text(res.Action + " " + string(content)), nil
			}
			answer, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": &mcp.ElicitParams{Message: a.Message, RequestedSchema: schema}},
					RequestState: "ask-state-" + a.Message}, nil
			}
			content, _ := json.Marshal(answer.Content)
			return text(answer.Action + " " + string(content) + " state=" + req.Params.RequestState), nil
		})
	s.AddTool(&mcp.Tool{Name: "capabilities", Description: "returns the client's capabilities", InputSchema: schema(``)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, err := json.Marshal(req.ClientCapabilities())
			if err != nil {
				return nil, err
			}
			return text(string(b)), nil
		})
	s.AddTool(&mcp.Tool{Name: "addtool", Description: "adds a tool", InputSchema: schema(`"name":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			s.AddTool(&mcp.Tool{Name: a.Name, Description: "added at run time", InputSchema: schema(``)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "touch", Description: "reports a resource as updated", InputSchema: schema(`"uri":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ URI string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: a.URI}); err != nil {
				return nil, err
			}
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "cancellations", Description: "reports the cancellations received", InputSchema: schema(`"key":{"type":"string"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Key string }
			if err := args(req, &a); err != nil {
				return nil, err
			}
			r, err := g.cancellations(ctx, a.Key)
			if err != nil {
				return nil, err
			}
			return text(r), nil
		})
	s.AddTool(&mcp.Tool{Name: "aborted", Description: "returns once n block calls were cancelled", InputSchema: schema(`"key":{"type":"string"},"n":{"type":"integer"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Key string
				N   int
			}
			if err := args(req, &a); err != nil {
				return nil, err
			}
			if err := g.wait(ctx, func() bool { return g.aborted[a.Key] >= a.N }); err != nil {
				return nil, err
			}
			return text("ok"), nil
		})
	s.AddTool(&mcp.Tool{Name: "headers", Description: "mirrors parameters into headers", InputSchema: schema(
		`"region":{"type":"string","x-mcp-header":"Region"},` +
			`"count":{"type":"integer","x-mcp-header":"Count"},` +
			`"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},` +
			`"query":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(req.Params.Arguments)), nil
		})
	for _, name := range []string{LongToolName, "dotted.name"} {
		s.AddTool(&mcp.Tool{Name: name, Description: "returns ok", InputSchema: schema(``)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
	}
	return g
}

// gates holds the state of the block, release, waiting, barrier,
// cancellations and aborted tools.
type gates struct {
	mu       sync.Mutex // guards the fields below
	blocked  map[string][]chan struct{}
	opened   map[string]chan struct{} // barrier key -> closed when n arrived
	changed  chan struct{}            // closed and replaced on every change
	barriers map[string]int
	aborted  map[string]int               // key -> block calls ended by cancellation
	blockIDs map[string][]json.RawMessage // key -> JSON-RPC ids of block calls
	// cancelled holds the requestIds of the notifications/cancelled
	// received.
	cancelled []json.RawMessage
	// done is closed by stop: every waiting call ends with an error.
	done     chan struct{}
	stopOnce sync.Once
}

var errStopped = errors.New("mcptest: server stopped")

// stop ends every waiting call, so that a server can close.
func (g *gates) stop() { g.stopOnce.Do(func() { close(g.done) }) }

func newGates() *gates {
	return &gates{
		blocked:  map[string][]chan struct{}{},
		opened:   map[string]chan struct{}{},
		barriers: map[string]int{},
		aborted:  map[string]int{},
		blockIDs: map[string][]json.RawMessage{},
		changed:  make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// signal wakes waitBlocked callers; g.mu must be held.
func (g *gates) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *gates) block(ctx context.Context, key string) error {
	ch := make(chan struct{})
	g.mu.Lock()
	g.blocked[key] = append(g.blocked[key], ch)
	g.signal()
	g.mu.Unlock()
	var err error
	select {
	case <-ch:
		return nil
	case <-g.done:
		err = errStopped
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	list := g.blocked[key]
	for i, c := range list {
		if c == ch {
			g.blocked[key] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if ctx.Err() != nil {
		g.aborted[key]++
	}
	g.signal()
	return err
}

// wait returns once cond, called with g.mu held, holds.
func (g *gates) wait(ctx context.Context, cond func() bool) error {
	for {
		g.mu.Lock()
		ok, changed := cond(), g.changed
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-g.done:
			return errStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// note records what the cancellations tool reports from one message the
// server received (the raw JSON body of a POST or a stdin line).
func (g *gates) note(data []byte) {
	m, err := jsonrpc.Decode(data)
	if err != nil {
		return
	}
	switch m.Method {
	case "tools/call":
		if name, _ := jsonrpc.StringField(m.Params, "name"); name != "block" || m.ID == nil {
			return
		}
		a, _ := jsonrpc.Field(m.Params, "arguments")
		key, _ := jsonrpc.StringField(a, "key")
		g.mu.Lock()
		defer g.mu.Unlock()
		g.blockIDs[key] = append(g.blockIDs[key], append(json.RawMessage(nil), m.ID...))
		g.signal()
	case "notifications/cancelled":
		id, ok := jsonrpc.Field(m.Params, "requestId")
		if !ok {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.cancelled = append(g.cancelled, append(json.RawMessage(nil), id...))
		g.signal()
	}
}

func (g *gates) cancellations(ctx context.Context, key string) (string, error) {
	if err := g.wait(ctx, func() bool { return len(g.cancelled) > 0 }); err != nil {
		return "", err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b, err := json.Marshal(struct {
		Block     []json.RawMessage `json:"block"`
		Cancelled []json.RawMessage `json:"cancelled"`
	}{append([]json.RawMessage{}, g.blockIDs[key]...), g.cancelled})
	return string(b), err
}

func (g *gates) release(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	list := g.blocked[key]
	for _, c := range list {
		close(c)
	}
	delete(g.blocked, key)
	g.signal()
	return len(list)
}

func (g *gates) waitBlocked(ctx context.Context, key string, n int) error {
	return g.wait(ctx, func() bool { return len(g.blocked[key]) >= n })
}

func (g *gates) barrier(ctx context.Context, key string, n int) error {
	g.mu.Lock()
	open, ok := g.opened[key]
	if !ok {
		open = make(chan struct{})
		g.opened[key] = open
	}
	g.barriers[key]++
	if g.barriers[key] == n {
		close(open)
	}
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-g.done:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}
