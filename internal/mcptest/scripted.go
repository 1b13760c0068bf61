package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// NoSession, as Route.Session, matches requests without Mcp-Session-Id.
const NoSession = "-"

// Scripted is a raw HTTP server whose answers a test writes, for what a
// correct MCP server never does. Each request goes to the first route, in
// the order they were added, that matches it and has answers left. A
// request no route matches fails the test and gets a 500. When the test
// ends, the server is closed and a route that never matched fails the test
// unless it is Optional.
type Scripted struct {
	// URL is the server's endpoint.
	URL string

	t   testing.TB
	srv *httptest.Server

	mu     sync.Mutex // guards the fields below
	routes []*Route
	reqs   []*Request
}

// Route matches requests and answers them.
type Route struct {
	// Method is the HTTP method to match; "" matches any.
	Method string
	// RPC is the JSON-RPC method of a POST body to match; "" matches any.
	RPC string
	// Session is the Mcp-Session-Id to match; "" matches any, NoSession
	// matches requests without one.
	Session string
	// Times is how many requests the route answers; 0 means no limit.
	Times int
	// Optional routes may go unused.
	Optional bool
	// Reply writes the answer. A reply that never answers waits for
	// req.Context to be done.
	Reply func(w http.ResponseWriter, req *Request)

	hits int
}

// Request is a request the server received.
type Request struct {
	Method string
	Header http.Header
	Body   []byte
	// Msg is the decoded body of a POST, or nil when it is not JSON-RPC.
	Msg *jsonrpc.Message
	// Context is done when the client goes away or the server closes.
	Context context.Context
}

// NewScripted starts a scripted server for the test.
func NewScripted(t testing.TB) *Scripted {
	t.Helper()
	s := &Scripted{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.srv.CloseClientConnections() // unblocks replies waiting for Context
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, r := range s.routes {
			if r.hits == 0 && !r.Optional {
				t.Errorf("mcptest.Scripted: expected %s (rpc %q, session %q) was never requested", orAny(r.Method), r.RPC, r.Session)
			}
		}
	})
	return s
}

func orAny(s string) string {
	if s == "" {
		return "any request"
	}
	return s
}

// On adds a route.
func (s *Scripted) On(r Route) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, &r)
}

// Requests returns the requests received so far, in order.
func (s *Scripted) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

func (s *Scripted) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := &Request{Method: r.Method, Header: r.Header.Clone(), Body: body, Context: r.Context()}
	if r.Method == http.MethodPost {
		if m, err := jsonrpc.Decode(body); err == nil {
			req.Msg = m
		}
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	var match *Route
	for _, rt := range s.routes {
		if rt.matches(req) {
			rt.hits++
			match = rt
			break
		}
	}
	s.mu.Unlock()
	if match == nil {
		method := ""
		if req.Msg != nil {
			method = req.Msg.Method
		}
		s.t.Errorf("mcptest.Scripted: unexpected %s (rpc %q, session %q)", r.Method, method, r.Header.Get("Mcp-Session-Id"))
		http.Error(w, "unexpected request", http.StatusInternalServerError)
		return
	}
	match.Reply(w, req)
}

func (rt *Route) matches(req *Request) bool {
	if rt.Times > 0 && rt.hits >= rt.Times {
		return false
	}
	if rt.Method != "" && rt.Method != req.Method {
		return false
	}
	if rt.RPC != "" && (req.Msg == nil || req.Msg.Method != rt.RPC) {
		return false
	}
	switch sid := req.Header.Get("Mcp-Session-Id"); rt.Session {
	case "":
	case NoSession:
		if sid != "" {
			return false
		}
	default:
		if sid != rt.Session {
			return false
		}
	}
	return true
}

// ReplyResult answers with a JSON-RPC result for the request's id, as
// application/json. header holds extra response headers as name, value
// pairs.
func ReplyResult(result string, header ...string) func(http.ResponseWriter, *Request) {
	return func(w http.ResponseWriter, req *Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		writeJSON(w, http.StatusOK, jsonrpc.AppendResult(nil, reqID(req), json.RawMessage(result)))
	}
}

// ReplyError answers with a JSON-RPC error for the request's id, as
// application/json with the given HTTP status. data may be "".
func ReplyError(status int, code int64, message, data string) func(http.ResponseWriter, *Request) {
	return func(w http.ResponseWriter, req *Request) {
		e := &jsonrpc.Error{Code: code, Message: message}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		writeJSON(w, status, jsonrpc.AppendError(nil, reqID(req), e))
	}
}

// ReplyStatus answers with a status and a plain-text body.
func ReplyStatus(status int, body string) func(http.ResponseWriter, *Request) {
	return func(w http.ResponseWriter, _ *Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// ReplyRaw answers 200 with the given content type and body, written as is.
func ReplyRaw(contentType, body string) func(http.ResponseWriter, *Request) {
	return func(w http.ResponseWriter, _ *Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}
}

// ReplySSE answers 200 with an SSE stream of the given raw event blocks
// (each written as is, with "\n\n" after it); "$ID" in a block is replaced
// with the request's id. The stream ends after the last block.
func ReplySSE(events ...string) func(http.ResponseWriter, *Request) {
	return func(w http.ResponseWriter, req *Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprint(w, replaceID(e, reqID(req)), "\n\n")
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
}

// ReplyNever waits until the client goes away.
func ReplyNever(_ http.ResponseWriter, req *Request) { <-req.Context.Done() }

func replaceID(s string, id json.RawMessage) string {
	out := []byte{}
	for i := 0; i < len(s); {
		if i+3 <= len(s) && s[i:i+3] == "$ID" {
			out = append(out, id...)
			i += 3
			continue
		}
		out = append(out, s[i])
		i++
	}
	return string(out)
}

func reqID(req *Request) json.RawMessage {
	if req.Msg == nil || req.Msg.ID == nil {
		return json.RawMessage("null")
	}
	return req.Msg.ID
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
