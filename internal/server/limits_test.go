package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

const (
	floodKey = "flood-key-0123456789"
	quietKey = "quiet-key-0123456789"
)

func limitKeys(t *testing.T) *policy.APIKeys {
	t.Helper()
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {floodKey}, "blue": {quietKey}})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func bearer(key string, more map[string]string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + key}
	for k, v := range more {
		h[k] = v
	}
	return h
}

// TestSessionFloodLeavesOthersRoom: one identity opening sessions past
// the table's size displaces only its own; another identity's initialize
// succeeds and its session lives on.
func TestSessionFloodLeavesOthersRoom(t *testing.T) {
	ts, _, _ := newTestServerWith(t, &Options{Identify: limitKeys(t).Identify, MaxSessions: 4})
	r := do(t, ts, "POST", bearer(quietKey, nil), initBody)
	quiet := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || quiet == "" {
		t.Fatalf("the quiet key's first initialize: %d %s", r.status, r.body)
	}
	var flood []string
	for i := range 12 {
		r := do(t, ts, "POST", bearer(floodKey, nil), initBody)
		if r.status != 200 {
			t.Fatalf("the flood's initialize %d: %d %s, want its own oldest session displaced", i, r.status, r.body)
		}
		flood = append(flood, r.header.Get("Mcp-Session-Id"))
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if r := do(t, ts, "POST", bearer(quietKey, map[string]string{"Mcp-Session-Id": quiet}), list); r.status != 200 {
		t.Errorf("the quiet key's session after the flood: %d %s", r.status, r.body)
	}
	if r := do(t, ts, "POST", bearer(quietKey, nil), initBody); r.status != 200 {
		t.Errorf("the quiet key's initialize after the flood: %d %s", r.status, r.body)
	}
	// The flood's newest sessions live, its oldest were ended (404: the
	// host initializes again).
	if r := do(t, ts, "POST", bearer(floodKey, map[string]string{"Mcp-Session-Id": flood[len(flood)-1]}), list); r.status != 200 {
		t.Errorf("the flood's newest session: %d %s", r.status, r.body)
	}
	wantError(t, do(t, ts, "POST", bearer(floodKey, map[string]string{"Mcp-Session-Id": flood[0]}), list), 404, jsonrpc.CodeInvalidRequest, "Session not found")
}

// TestSessionQuotaPerIdentity: an identity at its own quota has its least
// recently used session ended by its next initialize; others are not
// touched.
func TestSessionQuotaPerIdentity(t *testing.T) {
	ts, _, _ := newTestServerWith(t, &Options{Identify: limitKeys(t).Identify,
		Quotas: func(policy.Identity) (int, int) { return 2, 0 }})
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	r := do(t, ts, "POST", bearer(quietKey, nil), initBody)
	quiet := r.header.Get("Mcp-Session-Id")
	var ids []string
	for range 3 {
		r := do(t, ts, "POST", bearer(floodKey, nil), initBody)
		if r.status != 200 {
			t.Fatalf("initialize: %d %s", r.status, r.body)
		}
		ids = append(ids, r.header.Get("Mcp-Session-Id"))
	}
	// ids[1] is used, so ids[0] is the least recently used.
	wantError(t, do(t, ts, "POST", bearer(floodKey, map[string]string{"Mcp-Session-Id": ids[0]}), list), 404, jsonrpc.CodeInvalidRequest, "Session not found")
	for _, id := range ids[1:] {
		if r := do(t, ts, "POST", bearer(floodKey, map[string]string{"Mcp-Session-Id": id}), list); r.status != 200 {
			t.Errorf("a session within the quota: %d %s", r.status, r.body)
		}
	}
	if r := do(t, ts, "POST", bearer(quietKey, map[string]string{"Mcp-Session-Id": quiet}), list); r.status != 200 {
		t.Errorf("another identity's session: %d %s", r.status, r.body)
	}
}

// TestStreamQuotaPerIdentity: listen and GET streams over an identity's
// quota get 429 naming the limit; another identity still opens its own;
// a stream that ends gives its slot back.
func TestStreamQuotaPerIdentity(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(context.Background(), telemetry.Options{MetricReader: reader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	ts, _, _ := newTestServerWith(t, &Options{Identify: limitKeys(t).Identify, Telemetry: tel,
		Quotas: func(policy.Identity) (int, int) { return 0, 2 }})
	listenBody := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`
	listen := func(key string) *http.Request {
		return post(t, ts, bearer(key, modernHeaders("subscriptions/listen", "")), listenBody)
	}
	first := openStream(t, listen(floodKey))
	if ack := first.next(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first listen: %s", ack.Method)
	}
	// The second stream is a session's GET stream.
	r := do(t, ts, "POST", bearer(floodKey, nil), initBody)
	sid := r.header.Get("Mcp-Session-Id")
	getStream(t, ts, bearer(floodKey, map[string]string{"Mcp-Session-Id": sid}))
	// (Read with a status check first: a stream wrongly admitted must
	// fail the test, not hang it.)
	resp, err := ts.Client().Do(listen(floodKey))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		resp.Body.Close()
		t.Fatalf("a third stream: %d, want 429", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "2 open streams") {
		t.Errorf("a third stream: %s, want the limit named", body)
	}
	other := openStream(t, listen(quietKey))
	if ack := other.next(); ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("another identity's listen: %s", ack.Method)
	}
	if got := rejections(t, reader, telemetry.LimitStreams); got != 1 {
		t.Errorf("rejections{limit=streams} = %d, want 1", got)
	}
	// The first stream ends: its slot comes back.
	first.resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := post(t, ts, bearer(floodKey, modernHeaders("subscriptions/listen", "")), listenBody)
		resp, err := ts.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the slot of an ended stream did not come back: %d", resp.StatusCode)
		}
	}
}

// rejections returns the count of mcp_gateway.rejections{limit}.
func rejections(t *testing.T, reader sdkmetric.Reader, limit string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "mcp_gateway.rejections" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := dp.Attributes.Value(telemetry.AttrLimit); v == attribute.StringValue(limit) {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// TestRateLimitedPOST: a POST that Admit refuses gets 429 with
// Retry-After in whole seconds, counted by limit; another identity's
// requests pass.
func TestRateLimitedPOST(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := telemetry.New(context.Background(), telemetry.Options{MetricReader: reader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	keys := limitKeys(t)
	flood, _ := keys.Identify(floodKey)
	ts, d, _ := newTestServerWith(t, &Options{Identify: keys.Identify, Telemetry: tel,
		Admit: func(who policy.Identity) (string, time.Duration, bool) {
			if who.ID == flood.ID {
				return telemetry.LimitRate, 1500 * time.Millisecond, false
			}
			return "", 0, true
		}})
	r := do(t, ts, "POST", bearer(floodKey, nil), initBody)
	wantError(t, r, 429, jsonrpc.CodeInternalError, "rate limit")
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	if len(d.callers) != 0 {
		t.Error("the refused request reached the router")
	}
	if r := do(t, ts, "POST", bearer(quietKey, nil), initBody); r.status != 200 {
		t.Errorf("another identity: %d %s", r.status, r.body)
	}
	if got := rejections(t, reader, telemetry.LimitRate); got != 1 {
		t.Errorf("rejections{limit=rate} = %d, want 1", got)
	}
}

// TestListenURIsBounded: a subscriptions/listen may not ask for more than
// DefaultMaxListenURIs resources (each may be an upstream subscription),
// and a URI listed twice is subscribed once.
func TestListenURIsBounded(t *testing.T) {
	ts, d := newTestServer(t, nil)
	uris := func(n int, prefix string) string {
		list := make([]string, n)
		for i := range list {
			list[i] = fmt.Sprintf("%q", prefix+strconv.Itoa(i%max(1, n/2)))
		}
		return strings.Join(list, ",")
	}
	body := func(list string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"resourceSubscriptions":[` + list + `]}}}`
	}
	r := do(t, ts, "POST", modernHeaders("subscriptions/listen", ""), body(uris(config.DefaultMaxListenURIs+1, "test://many/")))
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "at most 256 resourceSubscriptions") {
		t.Errorf("a listen with too many URIs: %d %s, want 400 naming the bound", r.status, r.body)
	}
	d.mu.Lock()
	n := len(d.subscribed)
	d.mu.Unlock()
	if n != 0 {
		t.Errorf("%d subscriptions made for a refused listen", n)
	}
	s := openStream(t, post(t, ts, modernHeaders("subscriptions/listen", ""), body(`"test://a","test://b","test://a"`)))
	if ack := s.next(); ack.Method != "notifications/subscriptions/acknowledged" || strings.Count(string(ack.Params), "test://a") != 1 {
		t.Errorf("ack %s %s, want test://a once", ack.Method, ack.Params)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.subscribed) != 2 {
		t.Errorf("subscribed %v, want test://a and test://b once each", d.subscribed)
	}
}

// TestRateLimitChargesOnlyRequests: an identity whose rate limit is
// spent still gets its answers to the gateway's requests (sampling) and
// its notifications (notifications/cancelled) through, 202, uncharged:
// refusing them would leave its calls hanging to their timeout. Its next
// request gets 429.
func TestRateLimitChargesOnlyRequests(t *testing.T) {
	keys := limitKeys(t)
	var mu sync.Mutex
	charged := 0
	const budget = 3 // initialize and two calls
	ts, d, _ := newTestServerWith(t, &Options{Identify: keys.Identify,
		Admit: func(policy.Identity) (string, time.Duration, bool) {
			mu.Lock()
			defer mu.Unlock()
			charged++
			if charged > budget {
				return telemetry.LimitRate, time.Second, false
			}
			return "", 0, true
		}})
	waiting := make(chan struct{})
	cancelled := make(chan struct{})
	d.interactive = func(ctx context.Context, c *router.Caller, req *jsonrpc.Request) *router.Reply {
		if req.Name == "wait" {
			close(waiting)
			<-ctx.Done()
			close(cancelled)
			return &router.Reply{Error: jsonrpc.NewError(-1, "cancelled")}
		}
		resp, err := c.Host.Request(ctx, "sampling/createMessage", json.RawMessage(`{"messages":[]}`))
		if err != nil {
			return &router.Reply{Error: jsonrpc.NewError(-1, "%v", err)}
		}
		text, _ := jsonrpc.StringField(resp.Result, "text")
		return &router.Reply{Result: json.RawMessage(`{"content":[{"type":"text","text":"` + text + `"}]}`)}
	}
	r := do(t, ts, "POST", bearer(floodKey, nil), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	h := bearer(floodKey, map[string]string{"Mcp-Session-Id": sid})
	waited := make(chan response, 1)
	go func() {
		waited <- do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"wait"}}`)
	}()
	<-waiting
	stream := openStream(t, post(t, ts, h, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"ask"}}`))
	ask := stream.next()
	if ask.Method != "sampling/createMessage" || !ask.IsRequest() {
		t.Fatalf("event %+v, want the sampling request", ask)
	}
	// The budget is spent: the answer and the notification must pass.
	answer := `{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"text":"from the host"}}`
	if r := do(t, ts, "POST", h, answer); r.status != 202 {
		t.Fatalf("the host's answer with the rate limit spent: %d %s, want 202", r.status, r.body)
	}
	if final := stream.next(); string(final.ID) != `"call-1"` || !strings.Contains(string(final.Result), "from the host") {
		t.Errorf("final message %+v, want the call answered from the host's answer", final)
	}
	if r := do(t, ts, "POST", h, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w"}}`); r.status != 202 {
		t.Fatalf("notifications/cancelled with the rate limit spent: %d %s, want 202", r.status, r.body)
	}
	<-cancelled
	<-waited
	modern := `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{` + modernMeta + `}}`
	if r := do(t, ts, "POST", bearer(floodKey, modernHeaders("notifications/roots/list_changed", "")), modern); r.status != 202 {
		t.Errorf("a modern notification with the rate limit spent: %d %s, want 202", r.status, r.body)
	}
	wantError(t, do(t, ts, "POST", h, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`), 429, jsonrpc.CodeInternalError, "rate limit")
	mu.Lock()
	defer mu.Unlock()
	if charged != budget+1 {
		t.Errorf("Admit charged %d times, want %d (the requests only)", charged, budget+1)
	}
}

// TestFullTableEvictsFromTheHeaviestIdentityThatCan: when every session
// of the identity holding the most has an open GET stream, a new
// initialize takes the room of the least recently used session without
// a stream of the next identity by sessions held, not 503.
func TestFullTableEvictsFromTheHeaviestIdentityThatCan(t *testing.T) {
	const streamer, idler, newcomer = "streamer-key-0123456789", "idler-key-0123456789", "newcomer-key-0123456789"
	keys, err := policy.NewAPIKeys(map[string][]string{"red": {streamer}, "blue": {idler}, "green": {newcomer}})
	if err != nil {
		t.Fatal(err)
	}
	ts, _, _ := newTestServerWith(t, &Options{Identify: keys.Identify, MaxSessions: 5})
	initialize := func(key string) string {
		t.Helper()
		r := do(t, ts, "POST", bearer(key, nil), initBody)
		sid := r.header.Get("Mcp-Session-Id")
		if r.status != 200 || sid == "" {
			t.Fatalf("initialize: %d %s", r.status, r.body)
		}
		return sid
	}
	var streaming []string
	for range 3 {
		sid := initialize(streamer)
		getStream(t, ts, bearer(streamer, map[string]string{"Mcp-Session-Id": sid}))
		streaming = append(streaming, sid)
	}
	idle := []string{initialize(idler), initialize(idler)}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	// idle[1] is used, so idle[0] is the idler's least recently used.
	if r := do(t, ts, "POST", bearer(idler, map[string]string{"Mcp-Session-Id": idle[1]}), list); r.status != 200 {
		t.Fatalf("the idler's session: %d %s", r.status, r.body)
	}
	r := do(t, ts, "POST", bearer(newcomer, nil), initBody)
	if r.status != 200 {
		t.Fatalf("initialize with the table full, the heaviest identity all streaming: %d %s, want a session of the next identity ended", r.status, r.body)
	}
	wantError(t, do(t, ts, "POST", bearer(idler, map[string]string{"Mcp-Session-Id": idle[0]}), list), 404, jsonrpc.CodeInvalidRequest, "Session not found")
	if r := do(t, ts, "POST", bearer(idler, map[string]string{"Mcp-Session-Id": idle[1]}), list); r.status != 200 {
		t.Errorf("the idler's most recently used session: %d %s", r.status, r.body)
	}
	for _, sid := range streaming {
		if r := do(t, ts, "POST", bearer(streamer, map[string]string{"Mcp-Session-Id": sid}), list); r.status != 200 {
			t.Errorf("a streaming session: %d %s", r.status, r.body)
		}
	}
}
