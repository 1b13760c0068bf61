package router

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Resource subscriptions: hosts subscribe to resource URIs (legacy
// resources/subscribe, or the modern resourceSubscriptions filter of
// subscriptions/listen); the router keeps one upstream subscription per
// URI however many hosts want it, and hands each notifications/resources/updated
// to the hosts that subscribed.

// resourceSubs is the router's subscription table.
type resourceSubs struct {
	mu sync.Mutex // guards byURI
	// byURI maps a subscribed URI to its upstream and subscriber keys.
	byURI map[string]*resourceSub
	// waiting, when set (in tests), is called as a subscriber starts to
	// wait for the URI's upstream (un)subscription in flight.
	waiting func()
}

// resourceSub is the subscription to one URI. Its entry stays in the
// table while an upstream unsubscription is in flight, so that a new
// subscriber of the URI waits for it (op) rather than racing it: the
// upstream hears subscribe and unsubscribe for a URI in the order the
// table decided them.
type resourceSub struct {
	up   *upstreamState
	keys map[string]struct{} // guarded by resourceSubs.mu
	// op serialises the upstream (un)subscriptions of the URI and
	// guards subscribed: whether the upstream is subscribed.
	op         sync.Mutex
	subscribed bool
}

// modernSubscriber is an upstream client that can hold a modern
// subscriptions/listen stream (*upstream.Client).
type modernSubscriber interface {
	Subscribe(ctx context.Context, s upstream.Subscriptions) error
}

// SubscribeResource subscribes key (a legacy session id, or a modern
// listen stream's key) to a resource URI. The first subscriber of a URI
// subscribes the upstream that serves it.
func (r *Router) SubscribeResource(ctx context.Context, c *Caller, key, uri string) *jsonrpc.Error {
	v := r.catalog().view(c.View)
	var u *upstreamState
	if v != nil {
		u = v.resourceUpstream(r, uri, r.log)
	}
	if u == nil {
		return resourceNotFound(c, uri).Error
	}
	if !resourcesSubscribable(u.Client.Capabilities()) {
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "The server %q behind the gateway does not support resource subscriptions", u.Name)
	}
	r.subs.mu.Lock()
	if r.subs.byURI == nil {
		r.subs.byURI = map[string]*resourceSub{}
	}
	sub := r.subs.byURI[uri]
	if sub == nil {
		sub = &resourceSub{up: u, keys: map[string]struct{}{}}
		r.subs.byURI[uri] = sub
	}
	sub.keys[key] = struct{}{}
	waiting := r.subs.waiting
	r.subs.mu.Unlock()
	// Every subscriber waits until the upstream is subscribed: its
	// acknowledgement then means what it says.
	if !sub.op.TryLock() {
		if waiting != nil {
			waiting()
		}
		sub.op.Lock()
	}
	defer sub.op.Unlock()
	if sub.subscribed {
		return nil
	}
	if err := r.subscribeUpstream(ctx, sub.up, uri, true); err != nil {
		r.subs.mu.Lock()
		delete(sub.keys, key)
		if len(sub.keys) == 0 && r.subs.byURI[uri] == sub {
			delete(r.subs.byURI, uri)
		}
		r.subs.mu.Unlock()
		r.log.Warn("upstream resource subscription failed", keyUpstream, u.Name, "uri", uri, keyErr, err)
		if e := (*jsonrpc.Error)(nil); errors.As(err, &e) {
			return e
		}
		return jsonrpc.NewError(jsonrpc.CodeInternalError, "Subscribing to %s failed: %v", uri, err)
	}
	sub.subscribed = true
	return nil
}

// UnsubscribeResource removes key's subscription to uri; the last one
// unsubscribes the upstream.
func (r *Router) UnsubscribeResource(ctx context.Context, key, uri string) {
	r.subs.mu.Lock()
	sub := r.subs.byURI[uri]
	last := false
	if sub != nil {
		delete(sub.keys, key)
		last = len(sub.keys) == 0
	}
	r.subs.mu.Unlock()
	if !last {
		return
	}
	sub.op.Lock()
	defer sub.op.Unlock()
	r.subs.mu.Lock()
	still := len(sub.keys) == 0 // or a new subscriber came meanwhile
	r.subs.mu.Unlock()
	if still && sub.subscribed {
		if err := r.subscribeUpstream(ctx, sub.up, uri, false); err != nil {
			r.log.Debug("upstream resource unsubscription failed", keyUpstream, sub.up.Name, "uri", uri, keyErr, err)
		}
		sub.subscribed = false
	}
	r.subs.mu.Lock()
	if len(sub.keys) == 0 && r.subs.byURI[uri] == sub {
		delete(r.subs.byURI, uri)
	}
	r.subs.mu.Unlock()
}

// HostGone forgets a host whose session or stream has ended (key is the
// session id or the listen stream's key): its subscriptions end, and so
// do its per-client upstream sessions.
func (r *Router) HostGone(key string) {
	r.dropHost(key)
	r.dropSubscriptions(key)
}

// dropSubscriptions removes every subscription of key.
func (r *Router) dropSubscriptions(key string) {
	r.subs.mu.Lock()
	var uris []string
	for uri, sub := range r.subs.byURI {
		if _, ok := sub.keys[key]; ok {
			uris = append(uris, uri)
		}
	}
	r.subs.mu.Unlock()
	if len(uris) == 0 {
		return
	}
	r.spawn(func() {
		ctx, cancel := context.WithTimeout(r.life, 10*time.Second)
		defer cancel()
		for _, uri := range uris {
			r.UnsubscribeResource(ctx, key, uri)
		}
	})
}

// subscribeUpstream starts or ends an upstream's subscription to uri: an
// ordinary request on a legacy server, the listen filter on a modern one.
func (r *Router) subscribeUpstream(ctx context.Context, u *upstreamState, uri string, on bool) error {
	if u.isModern() {
		return r.listenUpstream(ctx, u)
	}
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	params, _ := json.Marshal(map[string]string{"uri": uri})
	callCtx, cancel := context.WithTimeout(ctx, u.Timeout)
	defer cancel()
	resp, err := u.Client.Send(callCtx, jsonrpc.NewOutgoing(method, params))
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}

// listenUpstream sets a modern upstream's subscriptions/listen filter:
// the list changes its capabilities announce, and the URIs hosts
// subscribed to.
func (r *Router) listenUpstream(ctx context.Context, u *upstreamState) error {
	s, ok := u.Client.(modernSubscriber)
	if !ok || !u.isModern() {
		return nil
	}
	// One filter at a time, so that the last one computed is the last
	// one set.
	u.listenMu.Lock()
	defer u.listenMu.Unlock()
	var filter upstream.Subscriptions
	caps := u.Client.Capabilities()
	filter.ToolsListChanged = listChanged(caps, "tools")
	filter.PromptsListChanged = listChanged(caps, "prompts")
	filter.ResourcesListChanged = listChanged(caps, "resources")
	r.subs.mu.Lock()
	for uri, sub := range r.subs.byURI {
		if sub.up == u && len(sub.keys) > 0 {
			filter.ResourceURIs = append(filter.ResourceURIs, uri)
		}
	}
	r.subs.mu.Unlock()
	slices.Sort(filter.ResourceURIs)
	return s.Subscribe(ctx, filter)
}

// resourceUpdated hands an upstream's notifications/resources/updated to
// the hosts that subscribed to the URI.
func (r *Router) resourceUpdated(u *upstreamState, n *jsonrpc.Message) {
	uri, _ := jsonrpc.StringField(n.Params, "uri")
	r.subs.mu.Lock()
	sub := r.subs.byURI[uri]
	var keys []string
	if sub != nil && sub.up == u {
		for k := range sub.keys {
			keys = append(keys, k)
		}
	}
	r.subs.mu.Unlock()
	if len(keys) == 0 || r.opts.OnChange == nil {
		return
	}
	slices.Sort(keys)
	r.opts.OnChange(Change{Method: n.Method, Params: n.Params, Subscribers: keys})
}

// listChanged reports whether capabilities announce list changes for a
// feature ("tools", "prompts", "resources").
func listChanged(caps json.RawMessage, feature string) bool {
	f, ok := jsonrpc.Field(caps, feature)
	if !ok {
		return false
	}
	v, ok := jsonrpc.Field(f, "listChanged")
	return ok && string(v) == "true"
}

// resourcesSubscribable reports whether a server supports resource
// subscriptions.
func resourcesSubscribable(caps json.RawMessage) bool {
	f, ok := jsonrpc.Field(caps, "resources")
	if !ok {
		return false
	}
	v, ok := jsonrpc.Field(f, "subscribe")
	return ok && string(v) == "true"
}
