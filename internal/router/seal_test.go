package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// mrtrCaller is a modern host of identity key in team t that can answer
// elicitations.
func mrtrCaller(key string) *Caller {
	return &Caller{ProtocolVersion: ModernVersion, Principal: key, View: "t", Capabilities: json.RawMessage(`{"elicitation":{}}`)}
}

const modernParams = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// retryOf is a retry of tools/call up__ask with a requestState.
func retryOf(state, responses string) *jsonrpc.Request {
	return request("tools/call", `{"name":"up__ask",`+modernParams+`,"requestState":`+string(jsonrpc.String(state))+`,"inputResponses":`+responses+`}`)
}

func inputRequired(t *testing.T, reply *Reply) (state string, keys []string) {
	t.Helper()
	var res struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if reply.Error != nil || json.Unmarshal(reply.Result, &res) != nil || res.ResultType != "input_required" {
		t.Fatalf("want an input_required result, got %v %s", reply.Error, reply.Result)
	}
	for k := range res.InputRequests {
		keys = append(keys, k)
	}
	return res.RequestState, keys
}

func wantBadState(t *testing.T, what string, reply *Reply) {
	t.Helper()
	if reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(reply.Error.Message, "requestState is unknown") {
		t.Errorf("%s: %v %s, want -32602 refusing the requestState", what, reply.Error, reply.Result)
	}
}

var twoKeysOneTeam = policy.Rules{Teams: []policy.Team{{Name: "t", Allow: []string{"*"}}}}

// TestParkedStateBoundToCaller: a modern host's call to a legacy upstream
// that asks for input is parked; its requestState continues it only for
// the identity it was issued to (not another key of the same team), only
// once, and not when tampered with.
func TestParkedStateBoundToCaller(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("ask", "other")}}
	up.answer = func(method string, _ json.RawMessage) (*jsonrpc.Message, error) {
		answer := up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("7"), Method: "elicitation/create",
			Params: json.RawMessage(`{"message":"your name?","requestedSchema":{"type":"object"}}`)})
		if answer.Error != nil {
			return &jsonrpc.Message{Error: answer.Error}, nil
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":` + string(jsonrpc.String(string(answer.Result))) + `}]}`)}, nil
	}
	r := startRouter(t, Options{Rules: twoKeysOneTeam}, map[string]*fakeUpstream{"up": up}, "up")
	alice, bob := mrtrCaller("key:alice"), mrtrCaller("key:bob")

	state, keys := inputRequired(t, r.Dispatch(context.Background(), alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	if len(keys) != 1 || !strings.HasPrefix(state, statePrefix) {
		t.Fatalf("input_required: keys %v, state %q", keys, state)
	}
	responses := `{"` + keys[0] + `":{"action":"accept","content":{"name":"alice"}}}`
	wantBadState(t, "another key of the same team", r.Dispatch(context.Background(), bob, retryOf(state, responses)))
	tampered := state[:len(state)-2] + "AA"
	if tampered == state {
		tampered = state[:len(state)-2] + "BB"
	}
	wantBadState(t, "a tampered state", r.Dispatch(context.Background(), alice, retryOf(tampered, responses)))
	wantBadState(t, "another tool's call", r.Dispatch(context.Background(), alice,
		request("tools/call", `{"name":"up__other",`+modernParams+`,"requestState":`+string(jsonrpc.String(state))+`}`)))

	reply := r.Dispatch(context.Background(), alice, retryOf(state, responses))
	if reply.Error != nil || !strings.Contains(string(reply.Result), `alice`) {
		t.Fatalf("alice's retry: %v %s, want the upstream's answer with her input", reply.Error, reply.Result)
	}
	wantBadState(t, "a replay", r.Dispatch(context.Background(), alice, retryOf(state, responses)))
}

// TestUpstreamStateWrapped: a modern upstream's input_required reaches a
// modern host with the upstream's requestState sealed inside the
// gateway's: the bare state and another identity's replay are refused
// without reaching the upstream, and the right identity's retry carries
// the upstream's own state.
func TestUpstreamStateWrapped(t *testing.T) {
	up := &fakeUpstream{version: ModernVersion, lists: map[string][]string{"tools/list": tools("ask")}}
	up.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		if state, ok := jsonrpc.StringField(params, "requestState"); ok {
			return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"state=` + state + `"}]}`)}, nil
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"upstream-secret"}`)}, nil
	}
	r := startRouter(t, Options{Rules: twoKeysOneTeam}, map[string]*fakeUpstream{"up": up}, "up")
	alice, bob := mrtrCaller("key:alice"), mrtrCaller("key:bob")

	state, _ := inputRequired(t, r.Dispatch(context.Background(), alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	if !strings.HasPrefix(state, statePrefix) || strings.Contains(state, "upstream-secret") {
		t.Fatalf("the host got requestState %q, want the gateway's sealed state", state)
	}
	calls := len(up.recorded())
	responses := `{"name":{"action":"accept","content":{}}}`
	wantBadState(t, "another identity's replay", r.Dispatch(context.Background(), bob, retryOf(state, responses)))
	wantBadState(t, "the upstream's bare state", r.Dispatch(context.Background(), alice, retryOf("upstream-secret", responses)))
	if n := len(up.recorded()); n != calls {
		t.Errorf("refused retries reached the upstream (%d calls, want %d)", n, calls)
	}
	reply := r.Dispatch(context.Background(), alice, retryOf(state, responses))
	if reply.Error != nil || !strings.Contains(string(reply.Result), "state=upstream-secret") {
		t.Fatalf("alice's retry: %v %s, want the upstream to get its own state back", reply.Error, reply.Result)
	}
}

func TestSealer(t *testing.T) {
	s := newSealer()
	c := &Caller{Principal: "key:a", View: "t"}
	state := s.seal(sealedState{Owner: c.owner(), Method: "tools/call", Subject: "x", Parked: "p1", Round: 2})
	st, err := s.open(state, c, "tools/call", "x")
	if err != nil || st.Parked != "p1" || st.Round != 2 {
		t.Fatalf("open: %+v, %v", st, err)
	}
	for _, tt := range []struct {
		name  string
		state string
		c     *Caller
		m, s  string
	}{
		{"other principal", state, &Caller{Principal: "key:b", View: "t"}, "tools/call", "x"},
		{"other view", state, &Caller{Principal: "key:a", View: "u"}, "tools/call", "x"},
		{"other method", state, c, "prompts/get", "x"},
		{"other subject", state, c, "tools/call", "y"},
		{"other sealer", newSealer().seal(sealedState{Owner: c.owner(), Method: "tools/call", Subject: "x"}), c, "tools/call", "x"},
		{"not base64", statePrefix + "!!", c, "tools/call", "x"},
		{"short", statePrefix + "AA", c, "tools/call", "x"},
		{"no prefix", "abc", c, "tools/call", "x"},
	} {
		if _, err := s.open(tt.state, tt.c, tt.m, tt.s); err == nil {
			t.Errorf("%s: opened", tt.name)
		}
	}
}

// TestRequestStateOnlyOnModernRetries: requestState and inputResponses
// reach no upstream but as the gateway's own, on a modern host's retry:
// a legacy host's, one on another method, and inputResponses without a
// requestState are refused; an upstream's input_required is sealed for
// the methods a host may retry (of two requestState members it sent,
// neither reaches the host) and an error on the others.
func TestRequestStateOnlyOnModernRetries(t *testing.T) {
	up := &fakeUpstream{version: ModernVersion, lists: map[string][]string{"tools/list": tools("ask"), "prompts/list": {`{"name":"p"}`}}}
	up.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
		return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"input_required","inputRequests":{},"requestState":"first","requestState":"second-bare"}`)}, nil
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	legacy := &Caller{ProtocolVersion: "2025-11-25", Session: "s", Capabilities: json.RawMessage(`{"elicitation":{}}`)}
	modern := mrtrCaller("")
	modern.View = ""
	for _, tt := range []struct {
		name   string
		c      *Caller
		method string
		params string
	}{
		{"a legacy host's requestState", legacy, "tools/call", `{"name":"up__ask","requestState":"x"}`},
		{"a legacy host's inputResponses", legacy, "tools/call", `{"name":"up__ask","inputResponses":{}}`},
		{"inputResponses without requestState", modern, "tools/call", `{"name":"up__ask",` + modernParams + `,"inputResponses":{"k":{}}}`},
		{"requestState on completion/complete", modern, "completion/complete", `{"ref":{"type":"ref/prompt","name":"up__p"},"argument":{"name":"a","value":""},` + modernParams + `,"requestState":"x"}`},
	} {
		calls := len(up.recorded())
		reply := r.Dispatch(context.Background(), tt.c, request(tt.method, tt.params))
		if reply.Error == nil || reply.Error.Code != jsonrpc.CodeInvalidParams || len(up.recorded()) != calls {
			t.Errorf("%s: %v %s (upstream calls %d -> %d), want -32602 without reaching the upstream", tt.name, reply.Error, reply.Result, calls, len(up.recorded()))
		}
	}
	reply := r.Dispatch(context.Background(), modern, request("tools/call", `{"name":"up__ask",`+modernParams+`}`))
	if reply.Error != nil || strings.Contains(string(reply.Result), "bare") || strings.Count(string(reply.Result), `"requestState"`) != 1 || !strings.Contains(string(reply.Result), statePrefix) {
		t.Errorf("tools/call: the host got %v %s, want one sealed requestState", reply.Error, reply.Result)
	}
	// A method no host may retry gets an error; the upstream's state
	// stays here.
	reply = r.Dispatch(context.Background(), modern, request("completion/complete", `{"ref":{"type":"ref/prompt","name":"up__p"},"argument":{"name":"a","value":""},`+modernParams+`}`))
	if reply.Error == nil || reply.Error.Code != jsonrpc.CodeInternalError || strings.Contains(reply.Error.Message, "first") || reply.Result != nil {
		t.Errorf("completion/complete answered with input_required: the host got %v %s, want an error", reply.Error, reply.Result)
	}
}

// TestSealedStateExpires: a state opens until stateTTL after it was
// sealed, and not after.
func TestSealedStateExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSealer()
		c := &Caller{Principal: "key:a", View: "t"}
		state := s.seal(sealedState{Owner: c.owner(), Method: "tools/call", Subject: "x"})
		time.Sleep(stateTTL)
		if _, err := s.open(state, c, "tools/call", "x"); err != nil {
			t.Errorf("at its expiry: %v", err)
		}
		time.Sleep(time.Millisecond)
		if _, err := s.open(state, c, "tools/call", "x"); err == nil {
			t.Error("opened after its expiry")
		}
	})
}

// TestStateOfAnotherKindOrUpstream: a parked call's state of an earlier
// round, and a wrapped state presented for another upstream, are
// refused without reaching an upstream.
func TestStateOfAnotherKindOrUpstream(t *testing.T) {
	up := &fakeUpstream{version: ModernVersion, lists: map[string][]string{"tools/list": tools("ask")}}
	other := &fakeUpstream{version: ModernVersion, lists: map[string][]string{"tools/list": tools("ask")}}
	r := startRouter(t, Options{Rules: twoKeysOneTeam}, map[string]*fakeUpstream{"up": up, "other": other}, "up", "other")
	alice := mrtrCaller("key:alice")
	// A wrapped state issued for "up" but naming "other__ask" as its
	// subject cannot be made by a host; one for "up" presented on
	// "other__ask" fails the subject, so seal one as the gateway would
	// for "other__ask" with "up" as its upstream.
	forged := r.sealer.seal(sealedState{Owner: alice.owner(), Method: "tools/call", Subject: "other__ask", Upstream: "up"})
	wantBadState(t, "a state of another upstream", r.Dispatch(context.Background(), alice,
		request("tools/call", `{"name":"other__ask",`+modernParams+`,"requestState":`+string(jsonrpc.String(forged))+`}`)))
	// A parked call's earlier round.
	pc := &parkedCall{id: "p", owner: alice.owner(), method: "tools/call", subject: "up__ask", round: 1, cancel: func() {}}
	r.parked.park(pc) // now in round 2
	stale := r.sealer.seal(sealedState{Owner: alice.owner(), Method: "tools/call", Subject: "up__ask", Parked: "p", Round: 1})
	wantBadState(t, "an earlier round's state", r.Dispatch(context.Background(), alice, retryOf(stale, `{}`)))
	if n := len(up.recorded()) + len(other.recorded()); n != 0 {
		t.Errorf("%d refused retries reached an upstream", n)
	}
}
