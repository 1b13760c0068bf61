package router

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
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
			Name: "up", Connect: f.connect, PerClient: true, MaxClients: 2, ClientIdle: time.Minute,
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
