package router

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// fakeFactory hands out a new fake per Connect and records what each was
// created with, as a per-client upstream does with processes.
type fakeFactory struct {
	mu    sync.Mutex
	made  []*fakeUpstream
	caps  []string
	lists map[string][]string
}

func (f *fakeFactory) connect(o ConnectOptions) (Upstream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	up := &fakeUpstream{lists: f.lists, handlers: o.Handlers}
	f.made = append(f.made, up)
	f.caps = append(f.caps, string(o.Capabilities))
	return up, nil
}

func (f *fakeFactory) snapshot() ([]*fakeUpstream, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeUpstream(nil), f.made...), append([]string(nil), f.caps...)
}

func (f *fakeUpstream) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func TestPerClientSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeFactory{lists: map[string][]string{"tools/list": tools("echo")}}
		r, err := New(&Options{ListWait: -1, Upstreams: []UpstreamConfig{{
			Name: "up", Connect: f.connect, PerClient: true, MaxClients: 2, ClientIdle: time.Minute, Relay: relayAll,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(context.Background())
		defer r.Close()
		synctest.Wait()

		call := func(c *Caller) {
			t.Helper()
			if reply := r.Dispatch(context.Background(), c, request("tools/call", `{"name":"up__echo"}`)); reply.Error != nil {
				t.Fatalf("call: %v", reply.Error)
			}
		}
		alice := &Caller{ProtocolVersion: "2025-11-25", Session: "alice", Capabilities: json.RawMessage(`{"roots":{}}`)}
		bob := &Caller{ProtocolVersion: "2025-11-25", Session: "bob", Capabilities: json.RawMessage(`{}`)}
		modern := &Caller{ProtocolVersion: ModernVersion, Capabilities: json.RawMessage(`{"sampling":{}}`)}
		call(alice)
		call(alice)
		call(bob)
		made, caps := f.snapshot()
		// The shared session (listing) plus one per host, each declaring
		// the host's own capabilities.
		if diff := cmp.Diff([]string{"", `{"roots":{}}`, `{}`}, caps); diff != "" {
			t.Fatalf("sessions made with capabilities (-want +got):\n%s", diff)
		}
		if n := len(made[1].recorded()); n != 2 {
			t.Errorf("alice's session got %d calls, want 2", n)
		}
		if n := len(made[0].recorded()); n != 0 {
			t.Errorf("the shared session got %d calls, want none", n)
		}

		// A third host exceeds MaxClients: the least recently used (alice)
		// is closed.
		call(modern)
		synctest.Wait()
		made, _ = f.snapshot()
		if !made[1].isClosed() || made[2].isClosed() {
			t.Errorf("after a third host: alice closed %v, bob closed %v; want alice's evicted", made[1].isClosed(), made[2].isClosed())
		}

		// A host that goes away loses its session at once.
		r.HostGone("bob")
		synctest.Wait()
		if !made[2].isClosed() {
			t.Error("bob's session outlived bob")
		}

		// An idle session is closed by the janitor.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if !made[3].isClosed() {
			t.Error("an idle per-client session was not closed")
		}
	})
}

// TestPerClientSessionsBoundToIdentity: modern hosts of two identities
// that declare the same capabilities get sessions of their own; a new
// session displaces one of its own identity's, else one of the identity
// that holds the most, and when every identity holds one it is refused
// with a tool error that says so.
func TestPerClientSessionsBoundToIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeFactory{lists: map[string][]string{"tools/list": tools("echo")}}
		r, err := New(&Options{ListWait: -1, Rules: policy.Rules{Teams: []policy.Team{{Name: "a", Allow: []string{"*"}}, {Name: "b", Allow: []string{"*"}}}},
			Upstreams: []UpstreamConfig{{Name: "up", Connect: f.connect, PerClient: true, MaxClients: 3, ClientIdle: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(context.Background())
		defer r.Close()
		synctest.Wait()
		host := func(principal, team, caps string) *Caller {
			return &Caller{ProtocolVersion: ModernVersion, Principal: principal, View: team, Capabilities: json.RawMessage(caps)}
		}
		call := func(c *Caller) *Reply {
			t.Helper()
			return r.Dispatch(context.Background(), c, request("tools/call", `{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`))
		}
		a1, a2, a3 := host("key:a", "a", `{}`), host("key:a", "a", `{"sampling":{}}`), host("key:a", "a", `{"roots":{}}`)
		b1, b2 := host("key:b", "b", `{}`), host("key:b", "b", `{"sampling":{}}`)
		for _, c := range []*Caller{a1, b1, a1, b1} {
			if reply := call(c); reply.Error != nil || reply.ToolError {
				t.Fatalf("call: %v %s", reply.Error, reply.Result)
			}
		}
		made, _ := f.snapshot()
		if len(made) != 3 || len(made[1].recorded()) != 2 || len(made[2].recorded()) != 2 {
			t.Fatalf("two identities with the same capabilities: %d sessions made, want the shared one and one each", len(made))
		}
		call(a2) // the pool is full now: the shared session lists, three per-client
		call(a3) // a's least recently used (a1) makes room
		synctest.Wait()
		made, _ = f.snapshot()
		if !made[1].isClosed() || made[2].isClosed() {
			t.Errorf("a's new session closed a1 %v, b1 %v; want only a's own", made[1].isClosed(), made[2].isClosed())
		}
		call(b2) // b displaces its own b1
		synctest.Wait()
		if made, _ = f.snapshot(); !made[2].isClosed() || made[3].isClosed() || made[4].isClosed() {
			t.Errorf("b's new session: b1 closed %v, a2 %v, a3 %v; want only b1", made[2].isClosed(), made[3].isClosed(), made[4].isClosed())
		}
		// A third identity has no session of its own to displace: it takes
		// the least recently used of the identity that holds the most (a,
		// with a2 and a3), so that no identity can fill the pool for all.
		if reply := call(host("key:c", "a", `{}`)); reply.Error != nil || reply.ToolError {
			t.Fatalf("a third identity in a pool that a holds two thirds of: %v %s", reply.Error, reply.Result)
		}
		synctest.Wait()
		if made, _ = f.snapshot(); !made[3].isClosed() || made[4].isClosed() || made[5].isClosed() {
			t.Errorf("c's session: a2 closed %v, a3 %v, b2 %v; want only a2", made[3].isClosed(), made[4].isClosed(), made[5].isClosed())
		}
		// With one session each, a fourth identity displaces nobody.
		reply := call(host("key:d", "b", `{}`))
		if reply.Error != nil || !reply.ToolError || !strings.Contains(string(reply.Result), "in use by other callers") {
			t.Errorf("a fourth identity in a pool of one session each: %v %s, want a tool error saying the sessions are in use", reply.Error, reply.Result)
		}
		if n, _ := f.snapshot(); len(n) != 7 {
			t.Errorf("%d sessions made, want 7 (no session for the refused identity)", len(n))
		}
	})
}

// TestPerClientSessionsOfProfilesAreOneIdentity: an identity's per-client
// sessions on several profiles' paths count as one identity's in the
// pool's fairness: it cannot hold one un-evictable session per path, and
// another identity takes the room of its least recently used one.
func TestPerClientSessionsOfProfilesAreOneIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeFactory{lists: map[string][]string{"tools/list": tools("echo")}}
		r, err := New(&Options{ListWait: -1, Rules: policy.Rules{Profiles: []policy.Team{{Name: "p"}, {Name: "q"}}},
			Upstreams: []UpstreamConfig{{Name: "up", Connect: f.connect, PerClient: true, MaxClients: 2, ClientIdle: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(context.Background())
		defer r.Close()
		synctest.Wait()
		call := func(principal, view string) *Reply {
			t.Helper()
			c := &Caller{ProtocolVersion: ModernVersion, Principal: principal, View: view, Capabilities: json.RawMessage(`{}`)}
			return r.Dispatch(context.Background(), c, request("tools/call", `{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`))
		}
		for _, view := range []string{"/p", "/q"} {
			if reply := call("key:a", view); reply.Error != nil || reply.ToolError {
				t.Fatalf("a on %s: %v %s", view, reply.Error, reply.Result)
			}
		}
		// The pool holds two sessions, both a's: b takes the room of a's
		// least recently used (the one of /p).
		if reply := call("key:b", ""); reply.Error != nil || reply.ToolError {
			t.Fatalf("b in a pool that a fills on two paths: %v %s", reply.Error, reply.Result)
		}
		synctest.Wait()
		if made, _ := f.snapshot(); len(made) != 4 || !made[1].isClosed() || made[2].isClosed() {
			t.Errorf("%d sessions made; want a's on /p closed and a's on /q kept", len(made))
		}
	})
}
