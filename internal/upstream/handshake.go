package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// Start launches or connects to the server, detects its era and performs
// the handshake. It returns once the Client is Ready, or with the error
// that left it Failed. ctx bounds the whole start; it does not bound the
// Client's life. Start may be called once.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closing:
		c.mu.Unlock()
		return c.errorf("start", ErrClosed)
	case c.started:
		c.mu.Unlock()
		return fmt.Errorf("upstream %q: already started", c.opts.Name)
	}
	c.started = true
	c.mu.Unlock()
	c.setState(Starting, nil)

	// Close aborts a start in progress.
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if err := c.start(ctx); err != nil {
		if c.life.Err() != nil {
			err = c.errorf("start", ErrClosed)
		}
		c.markDead(err)
		c.setState(Failed, err)
		c.mu.Lock()
		w := c.w
		c.mu.Unlock()
		if w != nil {
			_ = w.close() // stop a child process now, not at Close
		}
		return err
	}
	c.setState(Ready, nil)
	if c.State().Phase != Ready {
		return c.closedErr("start") // lost right after the handshake
	}
	return nil
}

func (c *Client) start(ctx context.Context) error {
	switch c.kind {
	case kindStdio:
		w, err := startStdio(c)
		if err != nil {
			return c.errorf("start", err)
		}
		if err := c.attach(w); err != nil {
			return err
		}
		return c.detectStdio(ctx, w)
	case kindStreamable:
		w := &httpWire{c: c}
		if err := c.attach(w); err != nil {
			return err
		}
		return c.detectHTTP(ctx, w)
	default:
		return c.startSSE(ctx)
	}
}

// attach makes w the Client's wire, unless Close has begun.
func (c *Client) attach(w wire) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		_ = w.close()
		return c.errorf("start", ErrClosed)
	}
	old := c.w
	c.w = w
	c.mu.Unlock()
	if old != nil {
		return old.close()
	}
	return nil
}

func (c *Client) startSSE(ctx context.Context) error {
	w, err := dialSSE(ctx, c)
	if err != nil {
		return c.errorf("connect (HTTP+SSE)", err)
	}
	if err := c.attach(w); err != nil {
		return err
	}
	return c.initialize(ctx, w)
}

// discoverParams is the params of a server/discover probe for version.
func (c *Client) discoverParams(version string) json.RawMessage {
	return json.RawMessage(`{"_meta":{"` + metaProtocolVersion + `":` + string(jsonrpc.String(version)) +
		`,"` + metaClientCapabilities + `":{},"` + metaClientInfo + `":` + string(c.clientInfo) + `}}`)
}

// decision is what a server/discover answer says about the server.
type decision struct {
	era     Era    // EraModern or EraLegacy; EraUnknown with retry or err
	version string // modern: the version to use; retry: to retry with
	retry   bool
	result  json.RawMessage // the DiscoverResult, if any
	err     error
}

// classify reads an answer to server/discover (spec 2026-07-28,
// basic/versioning "Backward Compatibility"): a DiscoverResult or a
// recognised modern error means a modern server, anything else a legacy
// one.
func classify(resp *jsonrpc.Message) decision {
	if resp.Error == nil {
		var r struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if json.Unmarshal(resp.Result, &r) != nil || r.SupportedVersions == nil {
			return decision{era: EraLegacy} // not a DiscoverResult
		}
		return fromVersions(r.SupportedVersions, resp.Result, false)
	}
	switch resp.Error.Code {
	case jsonrpc.CodeUnsupportedProtocolVersion:
		var d struct {
			Supported []string `json:"supported"`
		}
		_ = json.Unmarshal(resp.Error.Data, &d)
		return fromVersions(d.Supported, nil, true)
	case jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingRequiredClientCapability:
		// A modern server that objects to something in the probe itself;
		// its capabilities stay unknown.
		return decision{era: EraModern, version: versionModern}
	}
	return decision{era: EraLegacy}
}

func isModernCode(code int64) bool {
	return code <= jsonrpc.CodeHeaderMismatch && code >= jsonrpc.CodeUnsupportedProtocolVersion
}

// fromVersions picks from the versions a server supports: the newest
// modern one we support; failing that, legacy (initialize negotiates which
// legacy version). An UnsupportedProtocolVersion error naming a modern
// version asks for a retry with it.
func fromVersions(versions []string, result json.RawMessage, fromError bool) decision {
	best := ""
	for _, v := range versions {
		if isModernVersion(v) && v > best {
			best = v
		}
	}
	switch {
	case best != "" && fromError:
		return decision{retry: true, version: best}
	case best != "":
		return decision{era: EraModern, version: best, result: result}
	case len(versions) == 0 || slices.ContainsFunc(versions, isLegacyVersion):
		return decision{era: EraLegacy}
	}
	return decision{err: fmt.Errorf("no protocol version in common: the server supports %q, the gateway 2026-07-28, 2025-11-25, 2025-06-18 and 2025-03-26", versions)}
}

// detectStdio probes with server/discover (spec 2026-07-28, stdio
// "Backward Compatibility") and falls back to initialize.
func (c *Client) detectStdio(ctx context.Context, w wire) error {
	version := versionModern
	for attempt := 0; ; attempt++ {
		resp, err := c.roundTrip(ctx, w, "server/discover", c.discoverParams(version), callOpts{timeout: c.probeTimeout, noCancel: true, handshake: true})
		if errors.Is(err, ErrTimeout) {
			// Legacy servers may ignore a request before initialize. Its
			// answer, should it come after all, matches no pending call
			// and is dropped.
			c.log.Info("upstream did not answer server/discover: taking it for a legacy server", "probe_timeout", c.probeTimeout)
			return c.initialize(ctx, w)
		}
		if err != nil {
			return err
		}
		d := classify(resp)
		if d.retry && attempt == 0 {
			version = d.version
			continue
		}
		return c.decide(ctx, w, d)
	}
}

// decide acts on a classified discover answer.
func (c *Client) decide(ctx context.Context, w wire, d decision) error {
	switch {
	case d.err != nil:
		return c.errorf("server/discover", d.err)
	case d.retry:
		return c.errorf("server/discover", fmt.Errorf("the server rejected protocol version %s while listing it as supported", d.version))
	case d.era == EraModern:
		c.becomeModern(w, d.version, d.result)
		return nil
	}
	return c.initialize(ctx, w)
}

func (c *Client) becomeModern(w wire, version string, result json.RawMessage) {
	caps, _ := jsonrpc.Field(result, "capabilities")
	meta, _ := jsonrpc.Field(result, "_meta")
	info, _ := jsonrpc.Field(meta, metaServerInfo)
	instructions, _ := jsonrpc.StringField(result, "instructions")
	if hw, ok := w.(*httpWire); ok {
		hw.setModern(version)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Era, c.state.ProtocolVersion = EraModern, version
	c.caps, c.serverInfo, c.instructions = clone(caps), clone(info), instructions
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// initialize performs the legacy handshake (spec 2025-11-25, lifecycle):
// initialize, a check of the version the server chose, then
// notifications/initialized.
func (c *Client) initialize(ctx context.Context, w wire) error {
	params := json.RawMessage(`{"protocolVersion":"` + versionLegacy + `","capabilities":` + string(c.capabilities) + `,"clientInfo":` + string(c.clientInfo) + `}`)
	resp, err := c.roundTrip(ctx, w, "initialize", params, callOpts{timeout: c.timeout, handshake: true})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return c.errorf("initialize", resp.Error)
	}
	var r struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		return c.errorf("initialize", fmt.Errorf("%w: %v", ErrMalformed, err))
	}
	if !isLegacyVersion(r.ProtocolVersion) {
		return c.errorf("initialize", fmt.Errorf("the server chose protocol version %q, which the gateway does not speak", r.ProtocolVersion))
	}
	c.mu.Lock()
	c.state.Era, c.state.ProtocolVersion = EraLegacy, r.ProtocolVersion
	c.caps, c.serverInfo, c.instructions = r.Capabilities, r.ServerInfo, r.Instructions
	c.mu.Unlock()
	if hw, ok := w.(*httpWire); ok {
		hw.setLegacy(r.ProtocolVersion)
		// Before notifications/initialized, after which the server may
		// send notifications at once (some announce list_changed).
		hw.listenGET(ctx)
	}
	return c.notify(ctx, w, "notifications/initialized", nil, true)
}

// detectHTTP tries a modern request first (spec 2026-07-28, streamable-http
// "Backward Compatibility") and falls back to initialize, and from there,
// for an inferred transport, to HTTP+SSE.
func (c *Client) detectHTTP(ctx context.Context, w *httpWire) error {
	version := versionModern
	var d decision
	for attempt := 0; ; attempt++ {
		header := http.Header{}
		header.Set("MCP-Protocol-Version", version)
		header.Set("Mcp-Method", "server/discover")
		resp, err := c.roundTrip(ctx, w, "server/discover", c.discoverParams(version), callOpts{timeout: c.timeout, header: header, noCancel: true, handshake: true})
		var se *statusError
		switch {
		case errors.As(err, &se):
			d = decision{era: EraLegacy}
			if e := se.rpcError(); e != nil && isModernCode(e.Code) {
				d = classify(&jsonrpc.Message{Error: e})
			}
		case err != nil:
			return err
		default:
			d = classify(resp)
		}
		if d.retry && attempt == 0 {
			version = d.version
			continue
		}
		break
	}
	if d.era != EraLegacy || d.err != nil || d.retry {
		return c.decide(ctx, w, d)
	}
	err := c.initialize(ctx, w)
	var se *statusError
	if err != nil && c.inferred && errors.As(err, &se) &&
		(se.Code == http.StatusBadRequest || se.Code == http.StatusNotFound || se.Code == http.StatusMethodNotAllowed) {
		c.log.Info("upstream rejected a Streamable HTTP initialize: trying the deprecated HTTP+SSE transport", "status", se.Code)
		return c.startSSE(ctx)
	}
	return err
}
