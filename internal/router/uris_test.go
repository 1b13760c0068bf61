package router

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// collidingFakes are two upstreams, a and b, that list the same resource
// URI and the same template, and accept subscriptions.
func collidingFakes() map[string]*fakeUpstream {
	fake := func() *fakeUpstream {
		return &fakeUpstream{capabilities: `{"resources":{"subscribe":true},"completions":{}}`, lists: map[string][]string{
			"resources/list":           {`{"uri":"test://same","name":"same"}`},
			"resources/templates/list": {`{"uriTemplate":"test://t/{id}","name":"t"}`},
		}}
	}
	return map[string]*fakeUpstream{"a": fake(), "b": fake()}
}

// heard is the URI of each call of method among calls: its params.uri,
// or with ref its params.ref.uri.
func heard(calls []recordedCall, method string, ref bool) []string {
	var out []string
	for _, c := range calls {
		if c.Method != method {
			continue
		}
		params := json.RawMessage(c.Params)
		if ref {
			params, _ = jsonrpc.Field(params, "ref")
		}
		s, _ := jsonrpc.StringField(params, "uri")
		out = append(out, s)
	}
	return out
}

// TestCollidingResourceURIs: when two upstreams list the same URI (and
// the same template), the first keeps it and the second's is exposed as
// mcpgw://<upstream>/<URI>; both are readable, completable and
// subscribable, each upstream hears its own URI, and an update from the
// second reaches its subscribers under the gateway form.
func TestCollidingResourceURIs(t *testing.T) {
	for _, era := range []string{"2025-11-25", ModernVersion} {
		t.Run(era, func(t *testing.T) {
			fakes := collidingFakes()
			changes := make(chan Change, 8)
			r := startRouter(t, Options{OnChange: func(c Change) {
				if c.Method == "notifications/resources/updated" {
					changes <- c
				}
			}}, fakes, "a", "b")
			caller := &Caller{ProtocolVersion: era}
			ctx := context.Background()

			if diff := cmp.Diff([]string{"sametest://same", "samemcpgw://b/test://same"}, listNames(t, r.Dispatch(ctx, caller, request("resources/list", `{}`)), "resources")); diff != "" {
				t.Errorf("resources/list (-want +got):\n%s", diff)
			}
			var tpls struct {
				ResourceTemplates []struct{ URITemplate string } `json:"resourceTemplates"`
			}
			if err := json.Unmarshal(r.Dispatch(ctx, caller, request("resources/templates/list", `{}`)).Result, &tpls); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tp := range tpls.ResourceTemplates {
				got = append(got, tp.URITemplate)
			}
			if diff := cmp.Diff([]string{"test://t/{id}", "mcpgw://b/test://t/{id}"}, got); diff != "" {
				t.Errorf("resources/templates/list (-want +got):\n%s", diff)
			}

			for _, tc := range []struct {
				method, params string
				ref            bool // the URI is params.ref.uri
				wantA, wantB   []string
			}{
				{"resources/read", `{"uri":"test://same"}`, false, []string{"test://same"}, nil},
				{"resources/read", `{"uri":"mcpgw://b/test://same"}`, false, nil, []string{"test://same"}},
				{"resources/read", `{"uri":"test://t/7"}`, false, []string{"test://t/7"}, nil},
				{"resources/read", `{"uri":"mcpgw://b/test://t/7"}`, false, nil, []string{"test://t/7"}},
				{"completion/complete", `{"ref":{"type":"ref/resource","uri":"test://t/{id}"},"argument":{"name":"id","value":"1"}}`, true, []string{"test://t/{id}"}, nil},
				{"completion/complete", `{"ref":{"type":"ref/resource","uri":"mcpgw://b/test://t/{id}"},"argument":{"name":"id","value":"1"}}`, true, nil, []string{"test://t/{id}"}},
			} {
				before := map[string]int{"a": len(fakes["a"].recorded()), "b": len(fakes["b"].recorded())}
				reply := r.Dispatch(ctx, caller, request(tc.method, tc.params))
				if reply.Error != nil {
					t.Errorf("%s %s: %v", tc.method, tc.params, reply.Error)
					continue
				}
				for name, want := range map[string][]string{"a": tc.wantA, "b": tc.wantB} {
					if got := heard(fakes[name].recorded()[before[name]:], tc.method, tc.ref); !slices.Equal(got, want) {
						t.Errorf("%s %s: upstream %s heard %q, want %q", tc.method, tc.params, name, got, want)
					}
				}
			}
			if era == ModernVersion {
				return // resources/subscribe is a legacy method; listen is the server's
			}

			if e := r.SubscribeResource(ctx, caller, "s1", "test://same"); e != nil {
				t.Fatal(e)
			}
			if e := r.SubscribeResource(ctx, caller, "s2", "mcpgw://b/test://same"); e != nil {
				t.Fatal(e)
			}
			for name, want := range map[string][]string{"a": {"test://same"}, "b": {"test://same"}} {
				if got := heard(fakes[name].recorded(), "resources/subscribe", false); !slices.Equal(got, want) {
					t.Errorf("upstream %s subscribed to %q, want %q", name, got, want)
				}
			}
			for _, tc := range []struct{ from, key, uri string }{{"b", "s2", "mcpgw://b/test://same"}, {"a", "s1", "test://same"}} {
				u := r.upstreams()[slices.IndexFunc(r.upstreams(), func(u *upstreamState) bool { return u.Name == tc.from })]
				r.upstreamNotification(u, &u.calls, &jsonrpc.Message{Method: "notifications/resources/updated", Params: json.RawMessage(`{"uri":"test://same"}`)})
				select {
				case c := <-changes:
					uri, _ := jsonrpc.StringField(c.Params, "uri")
					if !slices.Equal(c.Subscribers, []string{tc.key}) || uri != tc.uri {
						t.Errorf("update from %s went to %v as %q, want %s as %q", tc.from, c.Subscribers, uri, tc.key, tc.uri)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("the update from %s reached nobody", tc.from)
				}
			}
			r.UnsubscribeResource(ctx, "s2", "mcpgw://b/test://same")
			if got := heard(fakes["b"].recorded(), "resources/unsubscribe", false); !slices.Equal(got, []string{"test://same"}) {
				t.Errorf("b unsubscribed from %q, want test://same", got)
			}
			if got := heard(fakes["a"].recorded(), "resources/unsubscribe", false); got != nil {
				t.Errorf("a unsubscribed from %q while s1 still wants it", got)
			}
		})
	}
}

// TestCollidingURIHiddenOwner: for a view that hides the first
// upstream's resources, the second's URI is its own, as if the first did
// not exist, and nothing reaches the hidden upstream.
func TestCollidingURIHiddenOwner(t *testing.T) {
	fakes := collidingFakes()
	r := startRouter(t, Options{Rules: policy.Rules{Teams: []policy.Team{{Name: "onlyb", Allow: []string{"b__*"}}}}}, fakes, "a", "b")
	caller := &Caller{ProtocolVersion: "2025-11-25", View: "onlyb"}
	ctx := context.Background()
	if diff := cmp.Diff([]string{"sametest://same"}, listNames(t, r.Dispatch(ctx, caller, request("resources/list", `{}`)), "resources")); diff != "" {
		t.Errorf("resources/list (-want +got):\n%s", diff)
	}
	if reply := r.Dispatch(ctx, caller, request("resources/read", `{"uri":"test://same"}`)); reply.Error != nil {
		t.Fatal(reply.Error)
	}
	// A gateway form naming a, which this view hides, is as unknown as
	// one naming no upstream; b's own gateway form still reaches b.
	for _, name := range []string{"a", "nobody"} {
		uri := "mcpgw://" + name + "/test://same"
		reply := r.Dispatch(ctx, caller, request("resources/read", `{"uri":"`+uri+`"}`))
		if reply.Error == nil || reply.Error.Code != -32002 || reply.Error.Message != "Resource not found: "+uri {
			t.Errorf("read %s: %+v %s, want resource not found", uri, reply.Error, reply.Result)
		}
	}
	if reply := r.Dispatch(ctx, caller, request("resources/read", `{"uri":"mcpgw://b/test://same"}`)); reply.Error != nil || reply.Upstream != "b" {
		t.Errorf("read mcpgw://b/test://same: %v, routed to %q", reply.Error, reply.Upstream)
	}
	if got := heard(fakes["b"].recorded(), "resources/read", false); !slices.Equal(got, []string{"test://same", "test://same"}) {
		t.Errorf("b heard reads of %q, want test://same twice", got)
	}
	if got := fakes["a"].recorded(); len(got) != 0 {
		t.Errorf("the hidden upstream heard %v", got)
	}
}

// TestCollidingURIWarnsOnce: a collision is logged when it appears, not
// again at every re-list while it lasts.
func TestCollidingURIWarnsOnce(t *testing.T) {
	var logs mcptest.LogBuffer
	r := startRouter(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, collidingFakes(), "a", "b")
	for range 3 {
		r.rebuild()
	}
	lines := strings.Split(logs.String(), "\n")
	for _, uri := range []string{"test://same", "test://t/{id}"} {
		if n := len(slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return !strings.Contains(l, uri) })); n != 1 {
			t.Errorf("the collision of %s was logged %d times, want once:\n%s", uri, n, logs.String())
		}
	}
}

// TestCollidingURIReadContents: the contents of a resource read by its
// gateway form carry that form, so that a host that keeps a content's
// URI reads the same resource again; other contents keep their URIs.
func TestCollidingURIReadContents(t *testing.T) {
	fakes := collidingFakes()
	fakes["b"].answer = func(_ string, params json.RawMessage) (*jsonrpc.Message, error) {
		uri, _ := jsonrpc.StringField(params, "uri")
		return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{"contents":[{"uri":"` + uri + `","text":"b"},{"uri":"test://other","text":"o"}]}`)}, nil
	}
	r := startRouter(t, Options{}, fakes, "a", "b")
	for _, era := range []string{"2025-11-25", ModernVersion} {
		reply := r.Dispatch(context.Background(), &Caller{ProtocolVersion: era}, request("resources/read", `{"uri":"mcpgw://b/test://same"}`))
		if reply.Error != nil {
			t.Fatal(reply.Error)
		}
		var res struct{ Contents []struct{ URI, Text string } }
		if err := json.Unmarshal(reply.Result, &res); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range res.Contents {
			got = append(got, c.URI)
		}
		if want := []string{"mcpgw://b/test://same", "test://other"}; !slices.Equal(got, want) {
			t.Errorf("%s: read contents' URIs %q, want %q", era, got, want)
		}
	}
}

// TestCollidingURIWaitsForItsUpstream: a read by gateway form, while
// the upstream it names is in its first start, waits for that upstream
// where the caller's view shows its resources (the view's patterns name
// the upstream's own URI), then reaches it.
func TestCollidingURIWaitsForItsUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fakes := collidingFakes()
		fakes["b"].startGate = make(chan struct{})
		opts := Options{ListWait: 10 * time.Second, Rules: policy.Rules{Teams: []policy.Team{{Name: "t", Allow: []string{"a__*", "b__test://*"}}}}}
		for _, name := range []string{"a", "b"} {
			opts.Upstreams = append(opts.Upstreams, UpstreamConfig{Name: name, Connect: fakes[name].connect, Timeout: time.Minute})
		}
		r := startUnwaited(t, &opts)
		synctest.Wait() // a is up and listed; b is starting
		done := make(chan *Reply)
		go func() {
			done <- r.Dispatch(context.Background(), &Caller{ProtocolVersion: "2025-11-25", View: "t"}, request("resources/read", `{"uri":"mcpgw://b/test://same"}`))
		}()
		synctest.Wait()
		close(fakes["b"].startGate)
		reply := <-done
		if reply.Error != nil || reply.Upstream != "b" {
			t.Errorf("read of mcpgw://b/test://same: %v, routed to %q; want b's answer", reply.Error, reply.Upstream)
		}
	})
}

// TestCollidingTemplateBeforeBroadOne: a URI in a template's gateway form
// reaches that template's upstream even when an upstream earlier in the
// catalog has a template that matches any URI.
func TestCollidingTemplateBeforeBroadOne(t *testing.T) {
	fakes := collidingFakes()
	fakes["a"].lists["resources/templates/list"] = []string{`{"uriTemplate":"{+any}","name":"any"}`, `{"uriTemplate":"test://t/{id}","name":"t"}`}
	r := startRouter(t, Options{}, fakes, "a", "b")
	reply := r.Dispatch(context.Background(), legacyCaller, request("resources/read", `{"uri":"mcpgw://b/test://t/7"}`))
	if reply.Error != nil || reply.Upstream != "b" || reply.Original != "test://t/7" {
		t.Errorf("read mcpgw://b/test://t/7: %v, routed to %q as %q; want b, test://t/7", reply.Error, reply.Upstream, reply.Original)
	}
}

// TestSubscriptionByTwoForms: a host subscribed to one resource by its
// URI and by its gateway form holds one upstream subscription, which
// ends with the last of the two; a host that goes away ends its
// subscription by gateway form.
func TestSubscriptionByTwoForms(t *testing.T) {
	fakes := collidingFakes()
	unsubscribed := map[string]chan string{"a": make(chan string, 4), "b": make(chan string, 4)}
	for name, f := range fakes {
		f.answer = func(method string, params json.RawMessage) (*jsonrpc.Message, error) {
			if method == "resources/unsubscribe" {
				uri, _ := jsonrpc.StringField(params, "uri")
				unsubscribed[name] <- uri
			}
			return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{}`)}, nil
		}
	}
	r := startRouter(t, Options{}, fakes, "a", "b")
	ctx := context.Background()
	awaitUnsubscribe := func(name string) string {
		t.Helper()
		select {
		case uri := <-unsubscribed[name]:
			return uri
		case <-time.After(10 * time.Second):
			t.Fatalf("%s was never unsubscribed", name)
			return ""
		}
	}
	for _, uri := range []string{"test://same", "mcpgw://a/test://same"} {
		if e := r.SubscribeResource(ctx, legacyCaller, "s1", uri); e != nil {
			t.Fatalf("subscribing to %s: %v", uri, e)
		}
	}
	if got := heard(fakes["a"].recorded(), "resources/subscribe", false); !slices.Equal(got, []string{"test://same"}) {
		t.Errorf("a heard subscriptions to %q, want test://same once", got)
	}
	r.UnsubscribeResource(ctx, "s1", "mcpgw://a/test://same")
	if got := heard(fakes["a"].recorded(), "resources/unsubscribe", false); got != nil {
		t.Errorf("a was unsubscribed from %q while s1 still subscribes by test://same", got)
	}
	r.UnsubscribeResource(ctx, "s1", "test://same")
	if got := awaitUnsubscribe("a"); got != "test://same" {
		t.Errorf("a was unsubscribed from %q, want test://same", got)
	}

	if e := r.SubscribeResource(ctx, legacyCaller, "s2", "mcpgw://b/test://same"); e != nil {
		t.Fatal(e)
	}
	r.HostGone("s2")
	if got := awaitUnsubscribe("b"); got != "test://same" {
		t.Errorf("b was unsubscribed from %q, want test://same", got)
	}
}

// TestCollidingURIGatewayFormTaken: an upstream that itself lists the
// gateway form an earlier upstream's URI would get keeps it; the earlier
// one's colliding URI is skipped, not listed twice.
func TestCollidingURIGatewayFormTaken(t *testing.T) {
	fakes := collidingFakes()
	fakes["c"] = &fakeUpstream{lists: map[string][]string{"resources/list": {`{"uri":"mcpgw://b/test://same","name":"mine"}`}}}
	r := startRouter(t, Options{}, fakes, "a", "b", "c")
	ctx := context.Background()
	if diff := cmp.Diff([]string{"sametest://same", "minemcpgw://b/test://same"}, listNames(t, r.Dispatch(ctx, legacyCaller, request("resources/list", `{}`)), "resources")); diff != "" {
		t.Errorf("resources/list (-want +got):\n%s", diff)
	}
	if reply := r.Dispatch(ctx, legacyCaller, request("resources/read", `{"uri":"mcpgw://b/test://same"}`)); reply.Error != nil || reply.Upstream != "c" || reply.Original != "mcpgw://b/test://same" {
		t.Errorf("read mcpgw://b/test://same: %v, routed to %q as %q; want c's own", reply.Error, reply.Upstream, reply.Original)
	}
}
