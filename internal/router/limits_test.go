package router

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

func keyCaller(principal string) *Caller {
	return &Caller{ProtocolVersion: ModernVersion, Principal: principal}
}

// TestConcurrentCallsPerIdentity: an identity at its quota of calls in
// flight on an upstream gets its next call refused at once, with an
// isError result naming the limit; another identity's call runs.
func TestConcurrentCallsPerIdentity(t *testing.T) {
	up, arrived, release := blockingUpstream()
	limits := NewLimits(LimitsOptions{Identity: map[string]IdentityQuotas{"": {ConcurrentCalls: 2}}})
	r := startRouter(t, Options{Limits: limits}, map[string]*fakeUpstream{"up": up}, "up")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for range 2 {
		wg.Go(func() {
			r.Dispatch(context.Background(), keyCaller("key:a"), request("tools/call", `{"name":"up__work"}`))
		})
		<-arrived
	}
	reply := r.Dispatch(context.Background(), keyCaller("key:a"), request("tools/call", `{"name":"up__work"}`))
	if !reply.ToolError || !strings.Contains(string(reply.Result), "concurrent_calls") {
		t.Fatalf("a third call: %s %v, want an isError result naming concurrent_calls", reply.Result, reply.Error)
	}
	wg.Go(func() {
		if reply := r.Dispatch(context.Background(), keyCaller("key:b"), request("tools/call", `{"name":"up__work"}`)); reply.ToolError {
			t.Errorf("another identity's call: %s", reply.Result)
		}
	})
	<-arrived
}

// TestToolRatePerIdentity: a tool's rate limit gives an isError result
// to the identity over it, not to another; the bucket refills with time.
func TestToolRatePerIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("work", "free")}}
		limits := NewLimits(LimitsOptions{Tools: map[string]map[string]Rate{"up": {"work": {Per: 1, Burst: 2}}}})
		r := startRouter(t, Options{Limits: limits}, map[string]*fakeUpstream{"up": up}, "up")
		call := func(who, tool string) *Reply {
			return r.Dispatch(context.Background(), keyCaller(who), request("tools/call", `{"name":"up__`+tool+`"}`))
		}
		for i := range 2 {
			if reply := call("key:a", "work"); reply.ToolError {
				t.Fatalf("call %d within the burst: %s", i, reply.Result)
			}
		}
		reply := call("key:a", "work")
		if !reply.ToolError || !strings.Contains(string(reply.Result), "rate limit") {
			t.Fatalf("a call over the rate: %s, want an isError result about the rate limit", reply.Result)
		}
		if reply := call("key:a", "free"); reply.ToolError {
			t.Errorf("another tool: %s", reply.Result)
		}
		if reply := call("key:b", "work"); reply.ToolError {
			t.Errorf("another identity: %s", reply.Result)
		}
		time.Sleep(time.Second)
		if reply := call("key:a", "work"); reply.ToolError {
			t.Errorf("after a second: %s", reply.Result)
		}
	})
}

// TestAdmit: an identity's and a team's token buckets, with the wait
// until a token is free; one identity's refusals leave another's
// requests alone; rejections are counted.
func TestAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rejected []string
		l := NewLimits(LimitsOptions{
			Rejected: func(limit string) { rejected = append(rejected, limit) },
			Identity: map[string]IdentityQuotas{"red": {Rate: Rate{Per: 2, Burst: 1}}},
			Team:     map[string]Rate{"red": {Per: 10, Burst: 3}},
		})
		a, b, c := policy.Identity{ID: "key:a", Team: "red"}, policy.Identity{ID: "key:b", Team: "red"}, policy.Identity{ID: "key:c", Team: "red"}
		if _, _, ok := l.Admit(a); !ok {
			t.Fatal("first request refused")
		}
		limit, retry, ok := l.Admit(a)
		if ok || limit != LimitRate || retry != 500*time.Millisecond {
			t.Fatalf("second request at once: %q %v %v, want refused by rate for 500ms", limit, retry, ok)
		}
		if _, _, ok := l.Admit(b); !ok {
			t.Fatal("another identity refused")
		}
		if _, _, ok := l.Admit(c); !ok {
			t.Fatal("a third identity refused within the team's burst")
		}
		d := policy.Identity{ID: "key:d", Team: "red"}
		if limit, _, ok := l.Admit(d); ok || limit != LimitTeamRate {
			t.Fatalf("past the team's burst: %q %v, want team_rate", limit, ok)
		}
		// d's own token went back: once the team refills, d passes.
		time.Sleep(100 * time.Millisecond)
		if _, _, ok := l.Admit(d); !ok {
			t.Fatal("after the team refilled")
		}
		time.Sleep(400 * time.Millisecond)
		if _, _, ok := l.Admit(a); !ok {
			t.Fatal("after 500ms")
		}
		if want := []string{LimitRate, LimitTeamRate}; !slices.Equal(rejected, want) {
			t.Errorf("rejections counted %v, want %v", rejected, want)
		}
	})
}

// TestBucketsAreBounded: a flood of identities keeps at most MaxBuckets
// buckets, dropping full ones (as good as new).
func TestBucketsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimits(LimitsOptions{MaxBuckets: 10, Identity: map[string]IdentityQuotas{"": {Rate: Rate{Per: 1, Burst: 1}}}})
		for i := range 100 {
			l.Admit(policy.Identity{ID: "key:" + strconv.Itoa(i)})
			time.Sleep(time.Second) // each bucket is full again
		}
		l.mu.Lock()
		n := len(l.buckets)
		l.mu.Unlock()
		if n > 10 {
			t.Fatalf("%d buckets, want at most 10", n)
		}
	})
}

// TestReplayedStateCountsAgainstTheRate: a modern upstream's wrapped
// requestState may be presented again until it expires, so each retry
// with it is a call for the tool's rate, not a way around it.
func TestReplayedStateCountsAgainstTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &fakeUpstream{version: ModernVersion, lists: map[string][]string{"tools/list": tools("ask")}}
		up.answer = func(string, json.RawMessage) (*jsonrpc.Message, error) {
			return &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s"}`)}, nil
		}
		limits := NewLimits(LimitsOptions{Tools: map[string]map[string]Rate{"up": {"ask": {Per: 1, Burst: 2}}}})
		r := startRouter(t, Options{Rules: twoKeysOneTeam, Limits: limits}, map[string]*fakeUpstream{"up": up}, "up")
		alice := mrtrCaller("key:alice")
		state, _ := inputRequired(t, r.Dispatch(context.Background(), alice, request("tools/call", `{"name":"up__ask",`+modernParams+`}`)))
		if reply := r.Dispatch(context.Background(), alice, retryOf(state, `{"name":{"action":"accept","content":{}}}`)); reply.ToolError {
			t.Fatalf("the first retry, within the burst: %s", reply.Result)
		}
		reply := r.Dispatch(context.Background(), alice, retryOf(state, `{"name":{"action":"accept","content":{}}}`))
		if !reply.ToolError || !strings.Contains(string(reply.Result), "rate limit") {
			t.Errorf("a replay past the rate: %v %s, want an isError result about the rate limit", reply.Error, reply.Result)
		}
	})
}

// TestViewMissingFromLimitsGetsTheDefaults: a key of a team added by a
// reload has a view the limits (read at start) do not know; it gets the
// top-level quotas and no team rate, never no limits at all.
func TestViewMissingFromLimitsGetsTheDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimits(LimitsOptions{
			Identity: map[string]IdentityQuotas{
				"":    {Rate: Rate{Per: 1, Burst: 1}, ConcurrentCalls: 1, Sessions: 2, Streams: 3},
				"red": {Rate: Rate{Per: 100, Burst: 100}, ConcurrentCalls: 10, Sessions: 20, Streams: 30},
			},
			Team: map[string]Rate{"": {Per: 1, Burst: 1}},
		})
		a, b := policy.Identity{ID: "key:a", Team: "new"}, policy.Identity{ID: "key:b", Team: "new"}
		if sessions, streams := l.Quotas(a); sessions != 2 || streams != 3 {
			t.Errorf("quotas of a new team's key: %d sessions, %d streams; want the defaults 2, 3", sessions, streams)
		}
		if _, _, ok := l.Admit(a); !ok {
			t.Fatal("a new team's key: first request refused")
		}
		if limit, _, ok := l.Admit(a); ok || limit != LimitRate {
			t.Errorf("a new team's key past the default rate: %q %v, want refused by rate", limit, ok)
		}
		// The default view's team bucket is not the new team's.
		if limit, _, ok := l.Admit(b); !ok {
			t.Errorf("another key of the new team: refused by %q, want no team rate", limit)
		}
		c := &Caller{Principal: "key:a", View: "new"}
		end, why := l.call(c, "up", "")
		if end == nil {
			t.Fatalf("a first call: %s", why)
		}
		defer end()
		if end2, why := l.call(c, "up", ""); end2 != nil || !strings.Contains(why, "concurrent_calls") {
			if end2 != nil {
				end2()
			}
			t.Errorf("a second call in flight: %q, want the default concurrent_calls (1) to refuse it", why)
		}
	})
}

// TestMovedKeyGetsItsNewTeamsRate: a key moved to another team by a
// reload is limited by its new team's rate, not by a bucket made with
// its old one.
func TestMovedKeyGetsItsNewTeamsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimits(LimitsOptions{Identity: map[string]IdentityQuotas{
			"red":  {Rate: Rate{Per: 1, Burst: 1}},
			"blue": {Rate: Rate{Per: 100, Burst: 5}},
		}})
		if _, _, ok := l.Admit(policy.Identity{ID: "key:a", Team: "red"}); !ok {
			t.Fatal("first request in red refused")
		}
		for i := range 5 {
			if limit, _, ok := l.Admit(policy.Identity{ID: "key:a", Team: "blue"}); !ok {
				t.Fatalf("request %d after the move to blue (burst 5): refused by %q", i, limit)
			}
		}
		if _, _, ok := l.Admit(policy.Identity{ID: "key:a", Team: "blue"}); ok {
			t.Error("past blue's burst: admitted")
		}
	})
}

// TestConcurrencyRefusalSpendsNoToolToken: a call refused for
// concurrent_calls leaves the tool's rate untouched, so that the next
// call, once a slot is free, is admitted.
func TestConcurrencyRefusalSpendsNoToolToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rejected []string
		l := NewLimits(LimitsOptions{
			Identity: map[string]IdentityQuotas{"": {ConcurrentCalls: 1}},
			Tools:    map[string]map[string]Rate{"up": {"work": {Per: 1, Burst: 2}}},
			Rejected: func(limit string) { rejected = append(rejected, limit) },
		})
		c := &Caller{Principal: "key:a"}
		end, why := l.call(c, "up", "work")
		if end == nil {
			t.Fatalf("first call: %s", why)
		}
		if end2, why := l.call(c, "up", "work"); end2 != nil || !strings.Contains(why, "concurrent_calls") {
			t.Fatalf("second call in flight: %q, want refused by concurrent_calls", why)
		}
		end()
		// No time has passed: only the token the refused call did not
		// spend is left.
		end, why = l.call(c, "up", "work")
		if end == nil {
			t.Fatalf("a call once the slot is free: %s, want admitted", why)
		}
		end()
		if want := []string{LimitConcurrentCalls}; !slices.Equal(rejected, want) {
			t.Errorf("rejections counted %v, want %v", rejected, want)
		}
	})
}

// BenchmarkLimitsCall is the limits' part of each call: a slot and a
// tool's token.
func BenchmarkLimitsCall(b *testing.B) {
	l := NewLimits(LimitsOptions{
		Identity: map[string]IdentityQuotas{"": {ConcurrentCalls: 64}},
		Tools:    map[string]map[string]Rate{"up": {"work": {Per: 1e9, Burst: 1 << 30}}},
	})
	c := &Caller{Principal: "key:a"}
	for b.Loop() {
		end, why := l.call(c, "up", "work")
		if end == nil {
			b.Fatal(why)
		}
		end()
	}
}

// ctxFake is a fakeUpstream whose calls see their context, so that the
// requests it sends during a call end when the call is cancelled.
type ctxFake struct {
	*fakeUpstream
	send func(ctx context.Context, params json.RawMessage) *jsonrpc.Message
}

func (f ctxFake) Send(ctx context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	return decoded(f.send(ctx, req.Params())), nil
}

// TestParkedCallHoldsItsSlot: a modern host's call to a legacy upstream
// that asks for input stays open upstream while the host gathers the
// input, so it keeps its concurrent_calls slot across rounds (the retry
// takes none) until the upstream call ends, by its answer or cancelled.
func TestParkedCallHoldsItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("ask", "sample", "plain")}}
		send := func(ctx context.Context, params json.RawMessage) *jsonrpc.Message {
			method := "elicitation/create"
			switch name, _ := jsonrpc.StringField(params, "name"); name {
			case "plain":
				return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"content":[]}`)}
			case "sample":
				method = "sampling/createMessage" // the host did not declare sampling
			}
			answer := up.handlers.Request(ctx, &jsonrpc.Message{ID: json.RawMessage("7"), Method: method,
				Params: json.RawMessage(`{"message":"your name?","requestedSchema":{"type":"object"},"messages":[]}`)})
			if answer.Error != nil {
				return &jsonrpc.Message{ID: json.RawMessage("1"), Error: answer.Error}
			}
			return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"content":[]}`)}
		}
		opts := Options{Rules: twoKeysOneTeam, ListWait: -1,
			Limits: NewLimits(LimitsOptions{Identity: map[string]IdentityQuotas{"t": {ConcurrentCalls: 1}}})}
		opts.Upstreams = []UpstreamConfig{{Name: "up", Timeout: 5 * time.Second, Relay: relayAll, Connect: func(o ConnectOptions) (Upstream, error) {
			_, err := up.connect(o)
			return ctxFake{up, send}, err
		}}}
		r, err := New(&opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.Start(context.Background())
		synctest.Wait()
		alice, bob := mrtrCaller("key:alice"), mrtrCaller("key:bob")
		ctx := context.Background()
		call := func(c *Caller, tool string) *Reply {
			return r.Dispatch(ctx, c, request("tools/call", `{"name":"up__`+tool+`",`+modernParams+`}`))
		}
		retry := func(c *Caller, state string, keys []string) *Reply {
			return r.Dispatch(ctx, c, retryOf(state, `{"`+keys[0]+`":{"action":"accept","content":{"name":"x"}}}`))
		}

		state, keys := inputRequired(t, call(alice, "ask"))
		if reply := call(alice, "plain"); !reply.ToolError || !strings.Contains(string(reply.Result), "concurrent_calls") {
			t.Fatalf("a second call while the first is parked: %v %s, want an isError result naming concurrent_calls", reply.Error, reply.Result)
		}
		if reply := call(bob, "plain"); reply.Error != nil || reply.ToolError {
			t.Fatalf("another identity's call: %v %s", reply.Error, reply.Result)
		}
		if reply := retry(alice, state, keys); reply.Error != nil || reply.ToolError {
			t.Fatalf("alice's retry, resuming her parked call: %v %s", reply.Error, reply.Result)
		}
		// The parked call answered: its slot is free, at once.
		if reply := call(alice, "plain"); reply.Error != nil || reply.ToolError {
			t.Fatalf("a call after the parked one answered: %v %s", reply.Error, reply.Result)
		}
		// A call the gateway cancels (the host lacks sampling) frees it too.
		if reply := call(alice, "sample"); reply.Error == nil && !reply.ToolError {
			t.Fatalf("a call asking for sampling: %s, want an error", reply.Result)
		}
		synctest.Wait() // the cancelled upstream call ends
		if reply := call(alice, "plain"); reply.Error != nil || reply.ToolError {
			t.Fatalf("a call after a cancelled one: %v %s", reply.Error, reply.Result)
		}
	})
}
