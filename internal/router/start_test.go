package router

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// TestRequestsWaitOnlyForTheirUpstream: with one upstream hanging in its
// first start, lists and the calls of the others are answered at once; a
// call of a tool of an upstream still starting waits for that upstream
// alone (at most ListWait), and an upstream that comes up later arrives
// with list_changed. /readyz (no upstream required) is ready once every
// first start has ended.
func TestRequestsWaitOnlyForTheirUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		good := &fakeUpstream{lists: map[string][]string{"tools/list": tools("ok")}}
		hang := &fakeUpstream{startGate: make(chan struct{}), lists: map[string][]string{"tools/list": tools("t")}}
		late := &fakeUpstream{startGate: make(chan struct{}), lists: map[string][]string{"tools/list": tools("x")}}
		var mu sync.Mutex
		var changes []string
		opts := Options{ListWait: 10 * time.Second, OnChange: func(ch Change) {
			mu.Lock()
			changes = append(changes, ch.Method)
			mu.Unlock()
		}}
		opts.Upstreams = []UpstreamConfig{
			{Name: "hang", Connect: hang.connect, Timeout: time.Minute}, // never answers: fails at its timeout
			{Name: "late", Connect: late.connect, Timeout: time.Minute},
			{Name: "good", Connect: good.connect, Timeout: time.Minute},
		}
		r := startUnwaited(t, &opts)
		synctest.Wait() // good is up and listed; hang and late are starting
		if r.Ready() {
			t.Error("ready while two upstreams are in their first start")
		}
		ctx := context.Background()

		start := time.Now()
		if diff := cmp.Diff([]string{"good__ok"}, listNames(t, r.Dispatch(ctx, legacyCaller, request("tools/list", `{}`)), "tools")); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
		if reply := r.Dispatch(ctx, legacyCaller, request("tools/call", `{"name":"good__ok"}`)); reply.Error != nil || reply.Upstream != "good" {
			t.Errorf("call of good__ok: %v, routed to %q", reply.Error, reply.Upstream)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("a list and a call of a ready upstream waited %v for the others", waited)
		}

		// A call of late's tool waits for late only: answered as soon as
		// it is up and listed.
		done := make(chan *Reply)
		go func() { done <- r.Dispatch(ctx, legacyCaller, request("tools/call", `{"name":"late__x"}`)) }()
		time.Sleep(2 * time.Second)
		close(late.startGate)
		reply := <-done
		if reply.Error != nil || reply.Upstream != "late" || !strings.Contains(string(reply.Result), `"x"`) {
			t.Errorf("call of late__x: %v %s, routed to %q; want late's answer", reply.Error, reply.Result, reply.Upstream)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("the call of late__x was answered after %v, want 2s, when late was up", waited)
		}
		synctest.Wait()
		mu.Lock()
		got := append([]string(nil), changes...)
		mu.Unlock()
		if !slices.Contains(got, "notifications/tools/list_changed") {
			t.Errorf("changes %v: hosts did not hear that late's tools arrived", got)
		}

		// A tool of the hanging upstream waits at most ListWait, then is
		// unknown; another upstream's unknown tool does not wait at all.
		start = time.Now()
		if reply := r.Dispatch(ctx, legacyCaller, request("tools/call", `{"name":"good__nope"}`)); reply.Error == nil || time.Since(start) != 0 {
			t.Errorf("good__nope: %v after %v, want an unknown tool at once", reply.Error, time.Since(start))
		}
		if reply := r.Dispatch(ctx, legacyCaller, request("tools/call", `{"name":"hang__t"}`)); reply.Error == nil || !strings.Contains(reply.Error.Message, "Unknown tool") {
			t.Errorf("hang__t: %v %s, want an unknown tool", reply.Error, reply.Result)
		}
		if waited := time.Since(start); waited != opts.ListWait {
			t.Errorf("hang__t waited %v, want ListWait (%v)", waited, opts.ListWait)
		}
		if r.Ready() {
			t.Error("ready while hang is in its first start")
		}
		time.Sleep(time.Minute) // hang's start times out
		synctest.Wait()
		if !r.Ready() {
			t.Error("not ready after every first start ended")
		}
	})
}

// TestStartWaitOnlyForVisibleUpstreams: a call waits for an upstream in
// its first start only when the caller's view could show it: for a team
// that hides the upstream, its names and URIs are unknown at once, as if
// it did not exist, while a team that may see it waits for it.
func TestStartWaitOnlyForVisibleUpstreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		secret := &fakeUpstream{startGate: make(chan struct{}), capabilities: `{"tools":{},"resources":{}}`,
			lists: map[string][]string{"tools/list": tools("x")}}
		good := &fakeUpstream{capabilities: `{"tools":{}}`, lists: map[string][]string{"tools/list": tools("ok")}}
		opts := Options{ListWait: 10 * time.Second, Rules: policy.Rules{Teams: []policy.Team{
			{Name: "red", Deny: []string{"secret__*"}},
			{Name: "blue", Allow: []string{"*"}},
		}}}
		opts.Upstreams = []UpstreamConfig{
			{Name: "secret", Connect: secret.connect, Timeout: time.Minute},
			{Name: "good", Connect: good.connect, Timeout: time.Minute},
		}
		r := startUnwaited(t, &opts)
		synctest.Wait() // good is up; secret is starting
		ctx := context.Background()
		red := &Caller{ProtocolVersion: "2025-11-25", Session: "s1", View: "red"}
		blue := &Caller{ProtocolVersion: "2025-11-25", Session: "s2", View: "blue"}

		start := time.Now()
		if reply := r.Dispatch(ctx, red, request("tools/call", `{"name":"secret__x"}`)); reply.Error == nil || !strings.Contains(reply.Error.Message, "Unknown tool") {
			t.Errorf("red calls secret__x: %v %s, want an unknown tool", reply.Error, reply.Result)
		}
		if reply := r.Dispatch(ctx, red, request("resources/read", `{"uri":"file:///a"}`)); reply.Error == nil {
			t.Errorf("red reads a URI: %s, want not found", reply.Result)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("a team that hides secret waited %v for it to start", waited)
		}

		start = time.Now()
		done := make(chan *Reply)
		go func() { done <- r.Dispatch(ctx, blue, request("tools/call", `{"name":"secret__x"}`)) }()
		time.Sleep(2 * time.Second)
		close(secret.startGate)
		if reply := <-done; reply.Error != nil || reply.Upstream != "secret" {
			t.Errorf("blue calls secret__x: %v, routed to %q; want secret's answer once it is up", reply.Error, reply.Upstream)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("blue's call was answered after %v, want 2s, when secret was up", waited)
		}
	})
}

// startUnwaited starts a router without waiting for its upstreams' first
// start, as a host that comes early meets it; Close runs at cleanup.
func startUnwaited(t *testing.T, opts *Options) *Router {
	t.Helper()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	r.Start(context.Background())
	return r
}

// TestURIWithTheSeparatorWaits: a URI is no exposed name, so one that
// happens to hold the separator ("test://a__b") still waits for the
// upstream in its first start that lists it.
func TestURIWithTheSeparatorWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := &fakeUpstream{startGate: make(chan struct{}), lists: map[string][]string{
			"tools/list": tools("x"), "resources/list": {`{"uri":"test://a__b","name":"ab"}`},
		}}
		other := &fakeUpstream{capabilities: `{"tools":{}}`, lists: map[string][]string{"tools/list": tools("y")}}
		opts := Options{ListWait: 10 * time.Second}
		opts.Upstreams = []UpstreamConfig{
			{Name: "late", Connect: late.connect, Timeout: time.Minute},
			{Name: "other", Connect: other.connect, Timeout: time.Minute},
		}
		r := startUnwaited(t, &opts)
		synctest.Wait()
		done := make(chan *Reply)
		go func() {
			done <- r.Dispatch(context.Background(), legacyCaller, request("resources/read", `{"uri":"test://a__b"}`))
		}()
		time.Sleep(time.Second)
		close(late.startGate)
		if reply := <-done; reply.Error != nil || reply.Upstream != "late" {
			t.Errorf("read of test://a__b during start-up: %v, routed to %q; want late's answer", reply.Error, reply.Upstream)
		}
	})
}
