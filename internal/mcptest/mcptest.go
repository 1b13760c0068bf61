// Package mcptest provides fake MCP servers for tests across the project.
// It is imported only by _test.go files.
//
// Three kinds of fakes:
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
//   - headers {region, count, opts: {dry}}: its input schema marks region,
//     count and opts.dry with x-mcp-header (Region, Count, Dry); returns
//     its arguments as text.
//   - LongToolName (longer than 64 characters) and "dotted.name": return
//     "ok".
//
// Prompts: greet {name}. Resources: test://static/hello ("hello") and
// test://static/world ("world"); the template test://items/{id} returns
// "item <id>".
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: "1.0.0"}, &mcp.ServerOptions{
		PageSize:                  o.PageSize,
		Instructions:              o.Instructions,
		SupportedProtocolVersions: o.Versions,
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

// gates holds the state of the block, release, waiting and barrier tools.
type gates struct {
	mu       sync.Mutex // guards the fields below
	blocked  map[string][]chan struct{}
	opened   map[string]chan struct{} // barrier key -> closed when n arrived
	changed  chan struct{}            // closed and replaced on every change
	barriers map[string]int
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
	g.signal()
	return err
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
	for {
		g.mu.Lock()
		count, changed := len(g.blocked[key]), g.changed
		g.mu.Unlock()
		if count >= n {
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
