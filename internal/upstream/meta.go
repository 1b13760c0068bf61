package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
)

// prepare adapts a request to the server's era, writes the trace context
// of ctx into it, and returns the extra HTTP headers it needs.
func (c *Client) prepare(ctx context.Context, req *jsonrpc.Outgoing) (http.Header, error) {
	c.mu.Lock()
	era, version := c.state.Era, c.state.ProtocolVersion
	c.mu.Unlock()
	c.traceMeta(ctx, req)
	if era != EraModern {
		stripModernMeta(req)
		return nil, nil
	}
	if err := c.modernMeta(req, version); err != nil {
		return nil, err
	}
	if c.kind == kindStreamable && req.Method == "tools/call" {
		return c.paramHeaders(req), nil
	}
	return nil, nil
}

// modernMeta sets the per-request metadata every modern request carries
// (spec 2026-07-28, basic/index "_meta"): the negotiated protocol version,
// replacing the caller's, which belongs to the host's side; the caller's
// client capabilities, or {}; the caller's client info, or the gateway's.
// Only _meta changes: the rest of params is sent byte for byte.
func (c *Client) modernMeta(req *jsonrpc.Outgoing, version string) error {
	if !req.IsObject() {
		return errors.New("params: expected a JSON object")
	}
	req.SetMeta(metaProtocolVersion, jsonrpc.String(version))
	if _, ok := req.MetaParam(metaClientCapabilities); !ok {
		req.SetMeta(metaClientCapabilities, json.RawMessage("{}"))
	}
	if _, ok := req.MetaParam(metaClientInfo); !ok {
		req.SetMeta(metaClientInfo, c.clientInfo)
	}
	return nil
}

// traceMeta writes the trace context of ctx, the call's (see
// Options.Propagator), into params._meta: traceparent, tracestate and
// baggage, the keys the 2026-07-28 revision documents, in both eras.
// They replace the host's, whose tracestate and baggage do not describe
// the gateway's span. Without a span in ctx (the gateway does not
// trace) nothing is written, and a host's own trace context passes as it
// was sent.
func (c *Client) traceMeta(ctx context.Context, req *jsonrpc.Outgoing) {
	if c.opts.Propagator == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	carrier := propagation.MapCarrier{}
	c.opts.Propagator.Inject(ctx, carrier)
	if _, ok := carrier["traceparent"]; !ok {
		return
	}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := carrier[k]; ok {
			req.SetMeta(k, jsonrpc.String(v))
		} else {
			req.SetMeta(k, nil)
		}
	}
}

// stripModernMeta removes the modern per-request keys from a request for
// a legacy server: a dual-era server would take a request that carries
// them for a modern one (and reject it when it serves only legacy
// versions).
func stripModernMeta(req *jsonrpc.Outgoing) {
	for _, k := range []string{metaProtocolVersion, metaClientCapabilities, metaClientInfo} {
		if _, ok := req.MetaParam(k); ok {
			req.SetMeta(k, nil)
		}
	}
}

// mcpName returns the value of the Mcp-Name header for a request (spec
// 2026-07-28, streamable-http "Standard Request Headers").
func mcpName(method string, req *jsonrpc.Outgoing) (string, bool) {
	switch method {
	case "tools/call", "prompts/get":
		return req.StringParam("name")
	case "resources/read":
		return req.StringParam("uri")
	}
	return "", false
}

// paramHeaders returns the Mcp-Param-* headers of a tools/call (spec
// 2026-07-28, streamable-http "Custom Headers from Tool Parameters").
func (c *Client) paramHeaders(req *jsonrpc.Outgoing) http.Header {
	name, ok := req.StringParam("name")
	if !ok {
		return nil
	}
	c.mu.Lock()
	bindings := c.toolHeaders[name]
	c.mu.Unlock()
	if len(bindings) == 0 {
		return nil
	}
	args, _ := req.Param("arguments")
	var h http.Header
	for _, b := range bindings {
		s, ok := b.Value(args)
		if !ok {
			continue // no value: omit the header
		}
		if h == nil {
			h = http.Header{}
		}
		h.Set(mcpheader.ParamPrefix+b.Header, mcpheader.Encode(s))
	}
	return h
}

// isObject reports whether b is a valid JSON object.
func isObject(b json.RawMessage) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}

// subscriptionID returns the subscription id a modern server tags the
// notifications of a subscriptions/listen stream with (the request's
// JSON-RPC id, in params._meta).
func subscriptionID(m *jsonrpc.Message) (int64, bool) {
	if !bytes.Contains(m.Params, []byte(metaSubscriptionID)) {
		return 0, false // the common case, without parsing
	}
	meta, _ := jsonrpc.Field(m.Params, "_meta")
	raw, ok := jsonrpc.Field(meta, metaSubscriptionID)
	if !ok {
		return 0, false
	}
	return jsonrpc.Int64ID(raw)
}

// stripSubscriptionID returns m without the subscription id in
// params._meta (and without a _meta left empty); m itself when it has
// none.
func stripSubscriptionID(m *jsonrpc.Message) *jsonrpc.Message {
	if !bytes.Contains(m.Params, []byte(metaSubscriptionID)) {
		return m
	}
	meta, ok := jsonrpc.Field(m.Params, "_meta")
	if !ok {
		return m
	}
	stripped := jsonrpc.DeleteField(meta, metaSubscriptionID)
	if len(stripped) == len(meta) {
		return m
	}
	var params json.RawMessage
	if isEmptyObject(stripped) {
		params = jsonrpc.DeleteField(m.Params, "_meta")
	} else {
		var err error
		if params, err = jsonrpc.SetField(m.Params, "_meta", stripped); err != nil {
			return m
		}
	}
	out := *m
	out.Params = params
	return &out
}

func isEmptyObject(b json.RawMessage) bool {
	t := bytes.TrimSpace(b)
	return len(t) >= 2 && t[0] == '{' && len(bytes.TrimSpace(t[1:len(t)-1])) == 0
}
