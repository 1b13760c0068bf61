package router

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// Resource subscriptions: hosts subscribe to resource URIs (legacy
// resources/subscribe, or the modern resourceSubscriptions filter of
// subscriptions/listen); the router keeps one upstream subscription per
// upstream and URI however many hosts want it, and hands each
// notifications/resources/updated to the hosts that subscribed, with the
// URI each subscribed by (the upstream's own, or its gateway form where
// another upstream lists it too: see gatewayScheme).

// resourceSubs is the router's subscription table.
type resourceSubs struct {
	mu sync.Mutex // guards byURI and byKey
	// byURI maps an upstream and a URI it knows to the subscription.
	byURI map[subTarget]*resourceSub
	// byKey maps a subscriber key and a URI it subscribed by to the
	// subscription, so that ending a host's subscriptions does not scan
	// everyone's.
	byKey map[string]map[string]*resourceSub
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
	subTarget
	// keys are the subscribers, each with the URI it subscribed by, to
	// which its updates are addressed (guarded by resourceSubs.mu). A
	// host subscribed by two (a URI and its gateway form) is addressed
	// by one of them.
	keys map[string]string
	// op serialises the upstream (un)subscriptions of the URI and
	// guards subscribed: whether the upstream is subscribed.
	op         sync.Mutex
	subscribed bool
}

// subTarget is what a subscription is to: an upstream, and the URI as
// it knows it.
type subTarget struct {
	up  *upstreamState
	uri string
}

// modernSubscriber is an upstream client that can hold a modern
// subscriptions/listen stream (*upstream.Client).
type modernSubscriber interface {
	Subscribe(ctx context.Context, s upstream.Subscriptions) error
}

// SubscribeResource subscribes key (a legacy session id, or a modern
// listen stream's key) to a resource URI, in the form its view lists it
// (see gatewayScheme). The first subscriber of an upstream's URI, by
// whichever form, subscribes that upstream to it.
func (r *Router) SubscribeResource(ctx context.Context, c *Caller, key, uri string) *jsonrpc.Error {
	v := r.catalog().view(c.View)
	var u *upstreamState
	var original string
	if v != nil {
		u, original = v.resourceUpstream(r, uri, r.log)
	}
	if u == nil {
		return resourceNotFound(c, uri).Error
	}
	if !resourcesSubscribable(u.Client.Capabilities()) {
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "The server %q behind the gateway does not support resource subscriptions", u.Name)
	}
	r.subs.mu.Lock()
	// A key subscribed by uri already keeps that subscription, even if
	// uri has since come to name another upstream's resource.
	sub := r.subs.byKey[key][uri]
	if sub == nil {
		sub = r.subs.add(key, uri, subTarget{u, original})
	}
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
	if err := r.subscribeUpstream(ctx, sub.up, sub.uri, true); err != nil {
		r.subs.mu.Lock()
		if r.subs.remove(sub, key, uri) && r.subs.byURI[sub.subTarget] == sub {
			delete(r.subs.byURI, sub.subTarget)
		}
		r.subs.mu.Unlock()
		r.log.Warn("upstream resource subscription failed", keyUpstream, sub.up.Name, "uri", sub.uri, keyErr, err)
		if e := (*jsonrpc.Error)(nil); errors.As(err, &e) {
			return e
		}
		return jsonrpc.NewError(jsonrpc.CodeInternalError, "Subscribing to %s failed: %v", uri, err)
	}
	sub.subscribed = true
	return nil
}

// UnsubscribeResource removes key's subscription to uri (as key
// subscribed to it); the last one unsubscribes the upstream.
func (r *Router) UnsubscribeResource(ctx context.Context, key, uri string) {
	r.subs.mu.Lock()
	sub := r.subs.byKey[key][uri]
	last := sub != nil && r.subs.remove(sub, key, uri)
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
		if err := r.subscribeUpstream(ctx, sub.up, sub.uri, false); err != nil {
			r.log.Debug("upstream resource unsubscription failed", keyUpstream, sub.up.Name, "uri", sub.uri, keyErr, err)
		}
		sub.subscribed = false
	}
	r.subs.mu.Lock()
	if len(sub.keys) == 0 && r.subs.byURI[sub.subTarget] == sub {
		delete(r.subs.byURI, sub.subTarget)
	}
	r.subs.mu.Unlock()
}

// HostGone forgets a host whose session or stream has ended (key is the
// session id or the listen stream's key): its subscriptions end, and so
// do its per-client upstream sessions and a session's exposed tools.
func (r *Router) HostGone(key string) {
	r.dropHost(key)
	r.dropExposed(key)
	r.dropSubscriptions(key)
}

// dropSubscriptions removes every subscription of key.
func (r *Router) dropSubscriptions(key string) {
	r.subs.mu.Lock()
	uris := slices.Collect(maps.Keys(r.subs.byKey[key]))
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

// add makes key a subscriber of target, by uri. The caller holds mu.
func (s *resourceSubs) add(key, uri string, target subTarget) *resourceSub {
	if s.byURI == nil {
		s.byURI, s.byKey = map[subTarget]*resourceSub{}, map[string]map[string]*resourceSub{}
	}
	sub := s.byURI[target]
	if sub == nil {
		sub = &resourceSub{subTarget: target, keys: map[string]string{}}
		s.byURI[target] = sub
	}
	sub.keys[key] = uri
	if s.byKey[key] == nil {
		s.byKey[key] = map[string]*resourceSub{}
	}
	s.byKey[key][uri] = sub
	return sub
}

// remove ends key's subscription by uri to sub, and reports whether sub
// has no subscriber left. A key that subscribed to the same target by
// two URIs (a URI and its gateway form) stays subscribed by the other.
// The caller holds mu.
func (s *resourceSubs) remove(sub *resourceSub, key, uri string) bool {
	mine := s.byKey[key]
	if mine[uri] == sub {
		delete(mine, uri)
	}
	if len(mine) == 0 {
		delete(s.byKey, key)
	}
	delete(sub.keys, key)
	for other, o := range mine {
		if o == sub {
			sub.keys[key] = other
			break
		}
	}
	return len(sub.keys) == 0
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
	for target, sub := range r.subs.byURI {
		if target.up == u && len(sub.keys) > 0 {
			filter.ResourceURIs = append(filter.ResourceURIs, target.uri)
		}
	}
	r.subs.mu.Unlock()
	slices.Sort(filter.ResourceURIs)
	return s.Subscribe(ctx, filter)
}

// resourceUpdated hands an upstream's notifications/resources/updated to
// the hosts that subscribed to the URI, each under the URI it subscribed
// by: the hosts of a view where the URI is in gateway form get that.
func (r *Router) resourceUpdated(u *upstreamState, n *jsonrpc.Message) {
	uri, _ := jsonrpc.StringField(n.Params, "uri")
	r.subs.mu.Lock()
	byAs := map[string][]string{} // the URI subscribed by -> its subscribers
	if sub := r.subs.byURI[subTarget{u, uri}]; sub != nil {
		for k, as := range sub.keys {
			byAs[as] = append(byAs[as], k)
		}
	}
	r.subs.mu.Unlock()
	if r.opts.OnChange == nil {
		return
	}
	for _, as := range slices.Sorted(maps.Keys(byAs)) {
		params := n.Params
		if as != uri {
			var err error
			if params, err = jsonrpc.SetField(n.Params, "uri", jsonrpc.String(as)); err != nil {
				r.log.Debug("upstream resource update not relayed", keyUpstream, u.Name, "uri", uri, keyErr, err)
				return
			}
		}
		keys := byAs[as]
		slices.Sort(keys)
		r.opts.OnChange(Change{Method: n.Method, Params: params, Subscribers: keys})
	}
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
