package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

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
	claims  map[string]string
}

type memPeer struct {
	net *memPeers
	id  string
}

func (p memPeer) Replica() string { return p.id }

func (p memPeer) Claim(_ context.Context, name string, _ time.Duration) (string, error) {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.claims == nil {
		p.net.claims = map[string]string{}
	}
	if owner, ok := p.net.claims[name]; ok {
		return owner, nil
	}
	p.net.claims[name] = p.id
	return p.id, nil
}

func (p memPeer) Disown(_ context.Context, name, replica string) error {
	p.net.mu.Lock()
	defer p.net.mu.Unlock()
	if p.net.claims[name] == replica {
		delete(p.net.claims, name)
	}
	return nil
}

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

	// The replica holding the call goes away before the retry. (The
	// first call ends on a just after its answer: the upstream's next
	// request for input must find one call in flight to go to.)
	awaitNoCalls(t, a, "up")
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

// TestPerClientSessionStaysOnItsReplica: a host's calls to a per-client
// upstream run on the replica that opened its upstream session, wherever
// they arrive; when that replica is gone before a call reaches it, the
// next replica starts a new session for the host.
func TestPerClientSessionStaysOnItsReplica(t *testing.T) {
	net := &memPeers{routers: map[string]*Router{}, gone: map[string]bool{}}
	keys := state.RandomSealer()
	fa := &fakeFactory{lists: map[string][]string{"tools/list": tools("echo")}}
	fb := &fakeFactory{lists: map[string][]string{"tools/list": tools("echo")}}
	start := func(f *fakeFactory, id string) *Router {
		r, err := New(&Options{ListWait: -1, Sealer: keys, Peers: memPeer{net, id}, Upstreams: []UpstreamConfig{{
			Name: "up", Connect: f.connect, PerClient: true, MaxClients: 4, ClientIdle: time.Minute, Timeout: 5 * time.Second, Relay: relayAll,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(context.Background())
		t.Cleanup(func() { _ = r.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.WaitStarted(ctx); err != nil {
			t.Fatal(err)
		}
		net.mu.Lock()
		net.routers[id] = r
		net.mu.Unlock()
		return r
	}
	a, b := start(fa, "a"), start(fb, "b")
	ada := &Caller{ProtocolVersion: "2025-11-25", Session: "ada", Capabilities: json.RawMessage(`{"roots":{}}`)}
	call := func(r *Router) {
		t.Helper()
		if reply := r.Dispatch(context.Background(), ada, request("tools/call", `{"name":"up__echo"}`)); reply.Error != nil || reply.ToolError {
			t.Fatalf("call: %v %s", reply.Error, reply.Result)
		}
	}
	call(a)
	call(b)
	call(b)
	madeA, _ := fa.snapshot()
	madeB, _ := fb.snapshot()
	if len(madeA) != 2 || len(madeA[1].recorded()) != 3 {
		t.Fatalf("replica a: %d sessions, want the listing one and ada's with all 3 calls", len(madeA))
	}
	if len(madeB) != 1 {
		t.Errorf("replica b opened %d per-client sessions for ada, want none", len(madeB)-1)
	}

	// Replica a is gone: b takes ada over with a session of its own.
	net.mu.Lock()
	net.gone["a"] = true
	net.mu.Unlock()
	call(b)
	call(b)
	if madeB, _ = fb.snapshot(); len(madeB) != 2 || len(madeB[1].recorded()) != 2 {
		t.Errorf("after a is gone: replica b has %d sessions, want ada's new one with her 2 calls", len(madeB))
	}
	if n := len(madeA[1].recorded()); n != 3 {
		t.Errorf("replica a's session got %d calls after it was gone", n-3)
	}
}

// awaitNoCalls waits until no call runs on the shared session of r's
// upstream name.
func awaitNoCalls(t *testing.T, r *Router, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		for _, u := range r.ups {
			if u.Name == name {
				u.calls.mu.Lock()
				n = len(u.calls.calls)
				u.calls.mu.Unlock()
			}
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still run on %s", n, name)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAwaitParked: a replica stopping waits for the calls parked on it,
// which the hosts' retries through another replica finish.
func TestAwaitParked(t *testing.T) {
	net := &memPeers{routers: map[string]*Router{}, gone: map[string]bool{}}
	keys := state.RandomSealer()
	a := startRouter(t, Options{Rules: twoKeysOneTeam, Sealer: keys, Peers: memPeer{net, "a"}}, map[string]*fakeUpstream{"up": elicitingUpstream("A")}, "up")
	b := startRouter(t, Options{Rules: twoKeysOneTeam, Sealer: keys, Peers: memPeer{net, "b"}}, map[string]*fakeUpstream{"up": elicitingUpstream("B")}, "up")
	net.routers["a"], net.routers["b"] = a, b
	alice := mrtrCaller("key:alice")
	ctx := context.Background()
	if !a.AwaitParked(ctx) {
		t.Fatal("AwaitParked with nothing parked did not return at once")
	}
	st, keysOf := inputRequired(t, a.Dispatch(ctx, alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	waiting, cancel := context.WithCancel(ctx)
	ended := make(chan bool, 1)
	go func() { ended <- a.AwaitParked(waiting) }()
	select {
	case <-ended:
		t.Fatal("AwaitParked returned while a call is parked")
	default:
	}
	reply := b.Dispatch(ctx, alice, retryOf(st, `{"`+keysOf[0]+`":{"action":"accept","content":{"name":"alice"}}}`))
	if reply.Error != nil || !strings.Contains(string(reply.Result), "A got") {
		t.Fatalf("the retry through b: %v %s", reply.Error, reply.Result)
	}
	if !<-ended {
		t.Error("AwaitParked did not report the parked call ended")
	}
	cancel()
	// Given up: a call no host comes back for ends AwaitParked's wait at
	// its context's end, saying so.
	awaitNoCalls(t, a, "up")
	st, keysOf = inputRequired(t, a.Dispatch(ctx, alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if a.AwaitParked(short) {
		t.Error("AwaitParked reported a call still parked as ended")
	}
	// (The fake upstream's request ignores cancellation: the call is
	// finished, so that the router closes.)
	if reply := a.Dispatch(ctx, alice, retryOf(st, `{"`+keysOf[0]+`":{"action":"accept","content":{}}}`)); reply.Error != nil {
		t.Errorf("the last retry: %v", reply.Error)
	}
}
