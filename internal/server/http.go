package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcpheader"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// HTTP header names of the Streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "MCP-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	headerLastEventID     = "Last-Event-ID"
)

// streamRetryMs is the retry a GET stream asks of a host that loses it:
// come back within half a second, to this or another replica.
const streamRetryMs = 500

// primingVersion is the first revision whose GET streams start with a
// priming event (2025-11-25 basic/transports "Resumability").
const primingVersion = "2025-11-25"

// _meta keys of the 2026-07-28 per-request protocol fields.
const (
	metaProtocolVersion    = jsonrpc.MetaProtocolVersion
	metaClientCapabilities = jsonrpc.MetaClientCapabilities
)

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	who, ok := s.identity(w, r)
	if !ok {
		return
	}
	if s.tel.Tracing() {
		// The host's trace context from the HTTP headers; the router
		// prefers that of the request's _meta.
		r = r.WithContext(s.tel.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, nil,
			jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json, got %q", ct))
		return
	}
	if !acceptsResponse(r.Header.Get("Accept")) {
		writeError(w, http.StatusNotAcceptable, nil,
			jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Not Acceptable: Accept must list application/json and text/event-stream"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, nil,
				jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request body larger than %d bytes", tooBig.Limit))
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.log.Warn("request body too slow", "remote", r.RemoteAddr)
			writeError(w, http.StatusRequestTimeout, nil,
				jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request body not received within %v", s.opts.BodyTimeout))
			return
		}
		writeError(w, http.StatusBadRequest, nil, jsonrpc.NewError(jsonrpc.CodeParseError, "Reading the request body: %v", err))
		return
	}
	// The body is in: what follows (a response stream) is bound by
	// write deadlines only. net/http clears the read deadline too when
	// its background read starts at the body's end; this does not rely
	// on it.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	msg, err := jsonrpc.DecodeRequest(body)
	if err != nil {
		code := int64(jsonrpc.CodeParseError)
		if errors.Is(err, jsonrpc.ErrInvalidRequest) {
			code = jsonrpc.CodeInvalidRequest
		}
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: code, Message: err.Error()})
		return
	}
	// Only requests are charged: a host's answer to the gateway's own
	// request (elicitation, sampling) and its notifications (cancelled)
	// are bounded by the body size and the session's state, and refusing
	// them would leave the calls they serve hanging to their timeout.
	if s.opts.Admit != nil && msg.IsRequest() {
		if limit, retry, ok := s.opts.Admit(who); !ok {
			s.tooManyRequests(w, msg.ID, limit, retry)
			return
		}
	}

	if id := r.Header.Get(headerSessionID); id != "" {
		s.postLegacy(w, r, id, who, msg)
		return
	}
	// A modern request is recognised first: "initialize" with modern
	// _meta is a modern request for a method that era removed.
	if isModernRequest(r, msg) {
		s.postModern(w, r, who, msg)
		return
	}
	if msg.Method == "initialize" {
		s.initialize(w, r, who, msg)
		return
	}
	if msg.IsResponse() || msg.IsNotification() {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Bad Request: missing %s header (legacy sessions begin with initialize)", headerSessionID))
		return
	}
	writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
		"Bad Request: missing %s header: send initialize first, or declare protocol version %s in params._meta[%q]",
		headerSessionID, router.ModernVersion, metaProtocolVersion))
}

// tooManyRequests answers a POST over a rate limit (RFC 6585: 429, with
// Retry-After in whole seconds, rounded up).
func (s *Server) tooManyRequests(w http.ResponseWriter, id json.RawMessage, limit string, retry time.Duration) {
	s.reject(limit)
	secs := max(1, int64((retry+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	what := "this identity's"
	if limit == telemetry.LimitTeamRate {
		what = "its team's"
	}
	writeError(w, http.StatusTooManyRequests, id, jsonrpc.NewError(jsonrpc.CodeInternalError,
		"Too Many Requests: %s request rate limit is reached; retry in %ds", what, secs))
}

// initialize opens a legacy session (2025-11-25 basic/lifecycle).
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, who policy.Identity, msg *jsonrpc.Request) {
	if !msg.IsRequest() {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "initialize must be a request"))
		return
	}
	requested := msg.ProtocolVersion
	if requested == "" {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "initialize needs params.protocolVersion"))
		return
	}
	version := router.NegotiateLegacy(requested)
	ss, err := s.newSession(version, who)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.NewError(jsonrpc.CodeInternalError, "Cannot open a session: %v", err))
		return
	}
	ss.capabilities = append(json.RawMessage(nil), msg.Capabilities...) // the body buffer is not kept
	if s.opts.Shared != nil {
		if err := s.opts.Shared.CreateSession(r.Context(), ss.id, state.SessionRecord{Capabilities: ss.capabilities}); err != nil {
			s.log.Warn("cannot record a new session", telemetry.KeyErr, err)
			s.forget(ss.id)
			sharedUnavailable(w, msg.ID, "cannot open a session")
			return
		}
	}
	s.log.Info("session opened", telemetry.KeySession, ss.id, "protocol_version", version, "requested_version", requested)
	w.Header().Set(headerSessionID, ss.id)
	writeReply(s.newRequestStream(w, r, ss, false), msg.ID, &router.Reply{Result: s.d.InitializeResult(version)})
}

// postLegacy handles a message on an existing legacy session.
func (s *Server) postLegacy(w http.ResponseWriter, r *http.Request, id string, who policy.Identity, msg *jsonrpc.Request) {
	ss := s.sessionFor(w, r, id, who, msg.ID)
	if ss == nil {
		return
	}
	if msg.Method == "initialize" {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Session already initialized: send initialize without %s", headerSessionID))
		return
	}
	// 2025-11-25 basic/transports "Protocol Version Header": a missing
	// header means 2025-03-26; an invalid or unsupported one is a 400.
	if v := r.Header.Get(headerProtocolVersion); v != "" && !slices.Contains(router.LegacyVersions, v) {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Bad Request: unsupported %s %q (this session negotiated %q)", headerProtocolVersion, v, ss.version))
		return
	}
	switch {
	case msg.IsResponse():
		// The host's answer to a request the gateway sent it, perhaps
		// from another replica.
		if !ss.link.resolve(&msg.Message) {
			s.tell(ss, tellAnswer, encodeResponse(&msg.Message))
		}
		w.WriteHeader(http.StatusAccepted)
		return
	case msg.IsNotification():
		if msg.Method == "notifications/cancelled" {
			if msg.RequestID != nil && !ss.link.cancel(msg.RequestID) {
				s.tell(ss, tellCancelled, msg.RequestID) // perhaps running on another replica
			}
		}
		// initialized and roots/list_changed need nothing more.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if !ss.link.track(msg.ID, cancel) {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request id %s is already in use in this session", msg.ID))
		return
	}
	defer ss.link.untrack(msg.ID)
	rs := s.newRequestStream(w, r, ss, false)
	caller := &router.Caller{ProtocolVersion: ss.version, Session: ss.id, Capabilities: ss.capabilities, LogLevel: ss.logLevel(), Host: rs,
		View: ss.view, Principal: ss.principal, Identity: ss.key, Token: hostToken(r, who)}
	reply := s.d.Dispatch(ctx, caller, msg)
	if ctx.Err() != nil && r.Context().Err() == nil {
		// The host cancelled the request (notifications/cancelled or the
		// session's end): it gets no response (2025-11-25
		// basic/utilities/cancellation), only the end of this one.
		rs.abandon()
		return
	}
	if reply.NoView {
		s.notAProfile(w, r)
		return
	}
	if msg.Method == "logging/setLevel" && reply.Error == nil {
		if s.opts.Shared != nil {
			if err := s.opts.Shared.SetLevel(ctx, ss.id, msg.Level); err != nil {
				s.log.Warn("cannot share a session's log level", telemetry.KeySession, ss.id, telemetry.KeyErr, err)
				why := "the gateway's shared session state does not answer; try again shortly"
				if errors.Is(err, state.ErrNoSession) {
					why = "the session has ended; initialize a new one"
				}
				reply = &router.Reply{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "The log level was not changed: %s", why)}
			}
		}
		if reply.Error == nil {
			ss.setLogLevel(msg.Level)
		}
	}
	writeReply(rs, msg.ID, reply)
}

// isModernRequest reports whether a request without a session speaks the
// modern era: it declares a version in params._meta, or a modern version
// in the header (postModern then checks that the two agree).
func isModernRequest(r *http.Request, msg *jsonrpc.Request) bool {
	return r.Header.Get(headerProtocolVersion) >= router.ModernVersion || msg.Meta.HasProtocolVersion
}

// postModern serves a stateless request (2026-07-28
// basic/transports/streamable-http "Server Validation").
func (s *Server) postModern(w http.ResponseWriter, r *http.Request, who policy.Identity, msg *jsonrpc.Request) {
	view := who.View()
	if msg.IsResponse() {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: clients must not send responses in protocol version %s", router.ModernVersion))
		return
	}
	if msg.IsNotification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if e := s.validateModern(r, view, msg); e != nil {
		writeError(w, http.StatusBadRequest, msg.ID, e)
		return
	}
	declared := msg.Meta.ProtocolVersion
	if !isModernSupported(declared) {
		data, _ := json.Marshal(map[string]any{"supported": router.SupportedVersions(), "requested": declared})
		writeError(w, http.StatusBadRequest, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version", Data: data})
		return
	}
	rs := s.newRequestStream(w, r, nil, true)
	caller := &router.Caller{ProtocolVersion: declared, Capabilities: msg.Meta.ClientCapabilities, LogLevel: msg.Meta.LogLevel,
		Host: rs, View: view, Principal: who.ID, Identity: who.Key, Token: hostToken(r, who)}
	if msg.Method == "subscriptions/listen" {
		s.listen(w, r, caller, &msg.Message)
		return
	}
	reply := s.d.Dispatch(r.Context(), caller, msg)
	if reply.NoView {
		s.notAProfile(w, r)
		return
	}
	writeReply(rs, msg.ID, reply)
}

func isModernSupported(v string) bool {
	for _, m := range router.ModernVersions {
		if v == m {
			return true
		}
	}
	return false
}

// validateModern checks the per-request fields and the headers that
// mirror them, including the Mcp-Param-* headers of tools whose schemas
// bind arguments to headers: those of the caller's view only, so that a
// tool the caller may not see answers like one that does not exist.
// Each failure names what is wrong.
func (s *Server) validateModern(r *http.Request, view string, msg *jsonrpc.Request) *jsonrpc.Error {
	declared := msg.Meta.ProtocolVersion
	if !msg.Meta.HasProtocolVersion {
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Invalid params: params._meta[%q] is required", metaProtocolVersion)
	}
	if msg.Meta.ClientCapabilities == nil {
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Invalid params: params._meta[%q] is required", metaClientCapabilities)
	}
	if h := r.Header.Get(headerProtocolVersion); h != declared {
		if h == "" {
			return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header is required", headerProtocolVersion)
		}
		return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header value %q does not match body value %q", headerProtocolVersion, h, declared)
	}
	if h := r.Header.Get(headerMethod); h != msg.Method {
		if h == "" {
			return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header is required", headerMethod)
		}
		return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header value %q does not match body value %q", headerMethod, h, msg.Method)
	}
	var want string
	switch msg.Method {
	case "tools/call", "prompts/get":
		want = msg.Name
	case "resources/read":
		want = msg.URI
	case "tasks/get", "tasks/update", "tasks/cancel":
		// ext-tasks "Streamable HTTP: Routing Headers": Mcp-Name is the
		// task id, which a load balancer may route by.
		want = msg.TaskID
	default:
		return nil
	}
	raw := r.Header.Get(headerName)
	if raw == "" {
		return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header is required for %s", headerName, msg.Method)
	}
	got, err := mcpheader.Decode(raw)
	if err != nil {
		return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header: %v", headerName, err)
	}
	if got != want {
		return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header value %q does not match body value %q", headerName, got, want)
	}
	if msg.Method == "tools/call" {
		if err := mcpheader.Check(s.d.ParamBindings(view, want), msg.Arguments, r.Header.Get); err != nil {
			return jsonrpc.NewError(jsonrpc.CodeHeaderMismatch, "Header mismatch: %v", err)
		}
	}
	return nil
}

// get opens the stream on which a legacy session receives server
// messages. Modern hosts have no GET stream (2026-07-28 removed it).
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	who, ok := s.identity(w, r)
	if !ok {
		return
	}
	id := r.Header.Get(headerSessionID)
	if id == "" {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Method Not Allowed: GET needs an %s (protocol version %s has no GET stream)", headerSessionID, router.ModernVersion))
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Not Acceptable: Accept must list text/event-stream"))
		return
	}
	ss := s.sessionFor(w, r, id, who, nil)
	if ss == nil {
		return
	}
	release, quota := s.takeStream(who)
	if release == nil {
		s.tooManyStreams(w, nil, quota)
		return
	}
	defer release()
	ss.mu.Lock()
	busy := ss.streaming
	ss.streaming = true
	ss.mu.Unlock()
	if busy {
		writeError(w, http.StatusConflict, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Conflict: the session already has a GET stream"))
		return
	}
	defer func() {
		ss.mu.Lock()
		ss.streaming = false
		ss.lastUsed = time.Now() // the idle time starts when the stream ends
		ss.mu.Unlock()
	}()
	out := newDeadlineWriter(w, s.opts.WriteTimeout)
	out.renew()
	startSSE(w)
	// The first event has an id and no data (2025-11-25 basic/transports
	// "Resumability"): a host that loses the stream comes back with it,
	// perhaps to another replica, and has made progress (the Go SDK gives
	// up a session whose stream drops again and again without). The
	// retry field asks it to come back soon.
	if ss.version >= primingVersion {
		// Clients of earlier revisions may take an event without data
		// for a malformed message (the SDKs prime 2025-11-25 only).
		_, _ = io.WriteString(out, "id: "+s.eventID(ss)+"\nretry: "+strconv.Itoa(streamRetryMs)+"\ndata: \n\n")
	}
	if s.resumedElsewhere(r.Header.Get(headerLastEventID)) {
		// What another replica (or an earlier start) had for this host
		// is not here to replay: the lists may have changed meanwhile,
		// so the host is told to read them again.
		for _, m := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
			writeEvent(out, jsonrpc.AppendNotification(nil, m, nil))
		}
	}
	_ = out.Flush()
	if err := pump(out, ss.out, s.opts.KeepAlive, r.Context().Done(), ss.done, s.closing); err != nil {
		s.log.Info("GET stream cut off: the host does not read it", telemetry.KeySession, ss.id, telemetry.KeyErr, err)
	}
}

// delete ends a legacy session.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	who, ok := s.identity(w, r)
	if !ok {
		return
	}
	id := r.Header.Get(headerSessionID)
	if id == "" {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
			"Method Not Allowed: DELETE needs an %s", headerSessionID))
		return
	}
	if s.sessionFor(w, r, id, who, nil) == nil {
		return
	}
	if s.opts.Shared != nil {
		// Ended in Redis first, and told to every replica: a session
		// whose DELETE was answered works nowhere.
		if err := s.opts.Shared.EndSession(r.Context(), id); err != nil {
			s.log.Warn("cannot end a session on the other replicas", telemetry.KeySession, id, telemetry.KeyErr, err)
			sharedUnavailable(w, nil, "the session was not ended")
			return
		}
		s.forget(id)
	} else if !s.endSession(id) {
		writeError(w, http.StatusNotFound, nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Session not found"))
		return
	}
	s.log.Info("session closed", telemetry.KeySession, id)
	w.WriteHeader(http.StatusNoContent)
}

// encodeResponse encodes a host's answer (to pass it on to the replica
// that asked).
func encodeResponse(m *jsonrpc.Message) []byte {
	if m.Error != nil {
		return jsonrpc.AppendError(nil, m.ID, m.Error)
	}
	return jsonrpc.AppendResult(nil, m.ID, m.Result)
}

// writeReply writes the answer to a request. A modern caller's result
// gets "resultType" if its upstream did not set one.
func writeReply(rs *requestStream, id json.RawMessage, reply *router.Reply) {
	if reply.Error != nil {
		status := http.StatusOK
		if rs.modern {
			status = modernErrorStatus(reply.Error.Code)
		}
		rs.answer(status, func(wr io.Writer) error {
			_, err := wr.Write(jsonrpc.AppendError(nil, id, reply.Error))
			return err
		})
		return
	}
	head, body := resultParts(id, reply, rs.modern)
	rs.answer(http.StatusOK, func(wr io.Writer) error {
		// The result goes out as its own write: a large result is never
		// copied into a second buffer.
		if _, err := io.WriteString(wr, head); err != nil {
			return err
		}
		if _, err := wr.Write(body); err != nil {
			return err
		}
		_, err := io.WriteString(wr, "}")
		return err
	})
}

// modernErrorStatus is the HTTP status of a JSON-RPC error answered to a
// modern request (2026-07-28 basic/transports/streamable-http and
// basic/index): an unknown method is 404; a header mismatch, a missing
// client capability and an unsupported version are 400, whether the
// gateway or an upstream found them.
func modernErrorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingRequiredClientCapability, jsonrpc.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// resultParts splits a successful response into its envelope's head and
// the result bytes that follow it (the caller closes the envelope with
// "}"). A modern caller's result gets "resultType" when it has none (the
// router says so; nothing here scans the result): the head then opens the
// result object itself, and the body is the upstream's bytes after their
// "{".
func resultParts(id json.RawMessage, reply *router.Reply, modern bool) (string, json.RawMessage) {
	head := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":`
	if modern && reply.LacksResultType {
		prefix, rest := resultTypePrefix(reply.Result)
		return head + prefix, rest
	}
	return head, reply.Result
}

// resultTypePrefix splits an object result into a prefix that opens it
// with "resultType" and the rest of its bytes. A result that is not an
// object is returned as it is.
func resultTypePrefix(result json.RawMessage) (string, json.RawMessage) {
	if len(result) == 0 || result[0] != '{' {
		return "", result
	}
	j := 1
	for j < len(result) && strings.IndexByte(" \t\r\n", result[j]) >= 0 {
		j++
	}
	if j < len(result) && result[j] == '}' {
		return `{"resultType":"complete"`, result[j:]
	}
	return `{"resultType":"complete",`, result[1:]
}

func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// writeError writes a JSON-RPC error response with an HTTP status.
func writeError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.AppendError(nil, id, e))
}

func isJSON(contentType string) bool {
	return mcpheader.MediaType(contentType) == "application/json"
}

// acceptsResponse reports whether the client can take a JSON or an SSE
// answer. The spec asks clients to list both; a missing header or */*
// is taken as accepting either.
func acceptsResponse(accept string) bool {
	if accept == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		switch mcpheader.MediaType(part) {
		case "application/json", "text/event-stream", "*/*", "application/*", "text/*":
			return true
		}
	}
	return false
}

func wantsSSEOnly(accept string) bool {
	return strings.Contains(accept, "text/event-stream") &&
		!strings.Contains(accept, "application/json") && !strings.Contains(accept, "*/*")
}

// hostToken is the request's bearer token when it is a validated OAuth
// access token (never an API key, which must not leave the gateway): the
// router carries it only for upstreams that exchange it (token_exchange).
func hostToken(r *http.Request, who policy.Identity) router.HostToken {
	if !strings.HasPrefix(who.ID, "oauth:") {
		return ""
	}
	return router.HostToken(bearerToken(r.Header.Get("Authorization")))
}
