package router

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// TestSubscriptionsInOrder: a host that subscribes to a URI while the
// last subscriber's upstream unsubscription is still in flight is
// subscribed after it, not before (which would leave the upstream
// unsubscribed); and a second subscriber's answer waits until the
// first's upstream subscription is made.
func TestSubscriptionsInOrder(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	unsubscribing, release := make(chan struct{}), make(chan struct{})
	up := &fakeUpstream{capabilities: `{"tools":{},"resources":{"subscribe":true}}`, lists: map[string][]string{
		"tools/list": tools("work"), "resources/list": {`{"uri":"test://a","name":"a"}`},
	}}
	inFlight, overlap := false, make(chan struct{})
	up.answer = func(method string, _ json.RawMessage) (*jsonrpc.Message, error) {
		switch mu.Lock(); {
		case method == "resources/unsubscribe":
			inFlight = true
			mu.Unlock()
			close(unsubscribing)
			<-release
		case inFlight:
			mu.Unlock()
			close(overlap) // a subscription sent while the unsubscription runs
		default:
			mu.Unlock()
		}
		mu.Lock()
		sent = append(sent, method)
		mu.Unlock()
		return &jsonrpc.Message{ID: json.RawMessage("1"), Result: json.RawMessage(`{}`)}, nil
	}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	ctx := context.Background()
	if e := r.SubscribeResource(ctx, legacyCaller, "s1", "test://a"); e != nil {
		t.Fatal(e)
	}
	gone := make(chan struct{})
	go func() { defer close(gone); r.UnsubscribeResource(ctx, "s1", "test://a") }()
	<-unsubscribing
	waiting := make(chan struct{})
	r.subs.mu.Lock()
	r.subs.waiting = func() { close(waiting) }
	r.subs.mu.Unlock()
	subscribed := make(chan struct{})
	go func() {
		defer close(subscribed)
		if e := r.SubscribeResource(ctx, legacyCaller, "s2", "test://a"); e != nil {
			t.Error(e)
		}
	}()
	select {
	case <-waiting:
	case <-overlap:
		t.Error("a subscription reached the upstream while its unsubscription was in flight")
	case <-subscribed:
		t.Error("the new subscription was answered while the unsubscription was in flight")
	}
	close(release)
	<-gone
	<-subscribed
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"resources/subscribe", "resources/unsubscribe", "resources/subscribe"}; !slices.Equal(sent, want) {
		t.Errorf("the upstream heard %v, want %v", sent, want)
	}
}
