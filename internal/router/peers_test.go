package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
)

// memPeers joins routers in one process as replicas: Call runs the other
// router's ServePeer, as state.Store does through Redis.
type memPeers struct {
	mu      sync.Mutex
	routers map[string]*Router
	gone    map[string]bool
	calls   int
}

type memPeer struct {
	net *memPeers
	id  string
}

func (p memPeer) Replica() string { return p.id }

func (p memPeer) Call(ctx context.Context, replica string, payload []byte) ([]byte, error) {
	p.net.mu.Lock()
	r := p.net.routers[replica]
	if p.net.gone[replica] {
		r = nil
	}
	p.net.calls++
	p.net.mu.Unlock()
	if r == nil {
		return nil, state.ErrReplicaGone
	}
	return r.ServePeer(ctx, payload), nil
}

// elicitingUpstream is a legacy upstream whose tool ask asks the host
// for a name and answers with it, as replica says.
func elicitingUpstream(replica string) *fakeUpstream {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("ask")}}
	up.answer = func(method string, _ json.RawMessage) (*jsonrpc.Message, error) {
		answer := up.handlers.Request(context.Background(), &jsonrpc.Message{ID: json.RawMessage("7"), Method: "elicitation/create",
			Params: json.RawMessage(`{"message":"your name?","requestedSchema":{"type":"object"}}`)})
		if answer.Error != nil {
			return &jsonrpc.Message{Error: answer.Error}, nil
		}
		return &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":` + string(jsonrpc.String(replica+" got "+string(answer.Result))) + `}]}`)}, nil
	}
	return up
}

// TestParkedCallAnsweredByItsReplica: a modern host's retry that reaches
// another replica is answered by the replica holding the parked call; a
// retry of another identity is refused before it leaves; when that
// replica is gone the host hears the call was interrupted, and nothing
// runs it again.
func TestParkedCallAnsweredByItsReplica(t *testing.T) {
	net := &memPeers{routers: map[string]*Router{}, gone: map[string]bool{}}
	keys := state.RandomSealer()
	upA, upB := elicitingUpstream("A"), elicitingUpstream("B")
	a := startRouter(t, Options{Rules: twoKeysOneTeam, Sealer: keys, Peers: memPeer{net, "a"}}, map[string]*fakeUpstream{"up": upA}, "up")
	b := startRouter(t, Options{Rules: twoKeysOneTeam, Sealer: keys, Peers: memPeer{net, "b"}}, map[string]*fakeUpstream{"up": upB}, "up")
	net.routers["a"], net.routers["b"] = a, b
	alice, bob := mrtrCaller("key:alice"), mrtrCaller("key:bob")
	ctx := context.Background()

	st, keysOf := inputRequired(t, a.Dispatch(ctx, alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	responses := `{"` + keysOf[0] + `":{"action":"accept","content":{"name":"alice"}}}`
	wantBadState(t, "another identity's retry on the other replica", b.Dispatch(ctx, bob, retryOf(st, responses)))
	if net.calls != 0 {
		t.Errorf("a refused retry went to the other replica (%d calls)", net.calls)
	}
	reply := b.Dispatch(ctx, alice, retryOf(st, responses))
	if reply.Error != nil || reply.ToolError || !strings.Contains(string(reply.Result), `A got`) || !strings.Contains(string(reply.Result), `alice`) {
		t.Fatalf("the retry on replica b: %v %s, want replica a's parked call to finish with alice's input", reply.Error, reply.Result)
	}
	if n := len(upB.recorded()); n != 0 {
		t.Errorf("replica b's upstream got %d calls; the call runs on a only", n)
	}

	// The replica holding the call goes away before the retry.
	st, keysOf = inputRequired(t, a.Dispatch(ctx, alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	net.mu.Lock()
	net.gone["a"] = true
	net.mu.Unlock()
	before := len(upB.recorded())
	responses = `{"` + keysOf[0] + `":{"action":"accept","content":{}}}`
	reply = b.Dispatch(ctx, alice, retryOf(st, responses))
	if !reply.ToolError || !strings.Contains(string(reply.Result), "interrupted") {
		t.Fatalf("a retry whose replica is gone: %v %s, want an isError result saying the call was interrupted", reply.Error, reply.Result)
	}
	if n := len(upB.recorded()); n != before {
		t.Errorf("the interrupted call was run again on replica b")
	}
	// (Replica a still holds the call: it ends with the retry there.)
	if reply := a.Dispatch(ctx, alice, retryOf(st, responses)); reply.Error != nil {
		t.Errorf("the retry on replica a itself: %v", reply.Error)
	}
}
