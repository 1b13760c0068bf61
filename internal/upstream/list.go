package upstream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

// maxListPages bounds the pages List follows.
const maxListPages = 1000

// List calls a list method ("tools/list", "prompts/list",
// "resources/list", "resources/templates/list"), follows nextCursor to the
// end (spec, server/utilities/pagination) and returns every item of
// itemsKey ("tools", "prompts", "resources", "resourceTemplates") as raw
// JSON, in the server's order. The items are copies the caller may keep.
//
// A JSON-RPC error from the server is returned as an error (a
// *jsonrpc.Error). A server that repeats a cursor, or needs more than 1000
// pages, is an error too.
//
// Listing tools from a modern server over Streamable HTTP also records the
// tools' x-mcp-header annotations for Call, and leaves out tools whose
// annotations are invalid (spec 2026-07-28, streamable-http "Schema
// Extension": clients MUST exclude them), with a warning.
func (c *Client) List(ctx context.Context, method, itemsKey string) ([]json.RawMessage, error) {
	return c.list(ctx, method, itemsKey, c.Call)
}

// callFunc sends one request, as Client.Call does.
type callFunc func(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error)

// list is List with each page requested through call, which must send it
// on c.
func (c *Client) list(ctx context.Context, method, itemsKey string, call callFunc) ([]json.RawMessage, error) {
	var (
		items  []json.RawMessage
		cursor json.RawMessage
		seen   = map[string]bool{}
	)
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, c.errorf(method, fmt.Errorf("%w: more than %d pages", ErrMalformed, maxListPages))
		}
		var params json.RawMessage
		if cursor != nil {
			params, _ = jsonrpc.SetField(nil, "cursor", cursor)
		}
		resp, err := call(ctx, method, params)
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, c.errorf(method, resp.Error)
		}
		raw, ok := jsonrpc.Field(resp.Result, itemsKey)
		if !ok {
			return nil, c.errorf(method, fmt.Errorf("%w: the result has no %q", ErrMalformed, itemsKey))
		}
		var pageItems []json.RawMessage
		if err := json.Unmarshal(raw, &pageItems); err != nil {
			return nil, c.errorf(method, fmt.Errorf("%w: %q is not an array", ErrMalformed, itemsKey))
		}
		items = append(items, pageItems...) // Unmarshal copied them
		next, ok := jsonrpc.Field(resp.Result, "nextCursor")
		if !ok || string(next) == "null" {
			break
		}
		// Cursors are opaque; an empty string is a cursor too.
		if len(next) == 0 || next[0] != '"' {
			return nil, c.errorf(method, fmt.Errorf("%w: nextCursor is not a string", ErrMalformed))
		}
		if seen[string(next)] {
			return nil, c.errorf(method, fmt.Errorf("%w: the server repeats cursor %s", ErrMalformed, truncate(next, 100)))
		}
		seen[string(next)] = true
		cursor = clone(next)
	}
	if method == "tools/list" {
		items = c.recordToolHeaders(items)
	}
	return items, nil
}

// recordToolHeaders keeps the x-mcp-header bindings of a complete tool
// list and drops the tools whose annotations are invalid. Only modern
// Streamable HTTP upstreams use them.
func (c *Client) recordToolHeaders(tools []json.RawMessage) []json.RawMessage {
	if c.kind != kindStreamable || c.Era() != EraModern {
		return tools
	}
	bindings := map[string][]mcpheader.Binding{}
	kept := tools[:0]
	for _, t := range tools {
		name, _ := jsonrpc.StringField(t, "name")
		b, err := mcpheader.Bindings(t)
		if err != nil {
			c.log.Warn("upstream tool left out: invalid x-mcp-header annotation", "tool", name, "err", err)
			continue
		}
		if len(b) > 0 {
			bindings[name] = b
		}
		kept = append(kept, t)
	}
	c.mu.Lock()
	c.toolHeaders = bindings
	c.mu.Unlock()
	return kept
}
