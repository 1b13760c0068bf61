package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// Change notifications reach hosts on long-lived streams: a legacy
// session's GET stream, or a modern host's subscriptions/listen stream.
// A host may open its stream late, or read it slowly, so each stream has
// an outbox: a bounded queue that keeps what arrived until the host
// reads it.

// outboxLimit bounds an outbox. Change notifications are idempotent
// ("look again"), so a full outbox drops new ones rather than grow.
const outboxLimit = 256

// outbox is a bounded queue of messages for one stream.
type outbox struct {
	mu sync.Mutex // guards msgs
	// msgs are the messages not yet written, oldest first.
	msgs [][]byte
	// ready holds a token while msgs is not empty.
	ready chan struct{}
}

func newOutbox() *outbox { return &outbox{ready: make(chan struct{}, 1)} }

// push queues msg unless the same message is already waiting or the
// queue is full; it reports whether msg is queued.
func (o *outbox) push(msg []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.msgs {
		if bytes.Equal(m, msg) {
			return true // one notice of a change is enough
		}
	}
	if len(o.msgs) >= outboxLimit {
		return false
	}
	o.msgs = append(o.msgs, msg)
	select {
	case o.ready <- struct{}{}:
	default:
	}
	return true
}

// take returns and removes every queued message.
func (o *outbox) take() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	msgs := o.msgs
	o.msgs = nil
	return msgs
}

// pump writes the outbox to an SSE stream until a stop channel is closed
// or a write fails (the host is gone, or took nothing for the write
// timeout), which it returns. It also writes a comment line every
// keepAlive so that proxies keep an idle stream open.
func pump(w *deadlineWriter, o *outbox, keepAlive time.Duration, stop1, stop2, stop3 <-chan struct{}) error {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-stop1:
			return nil
		case <-stop2:
			return nil
		case <-stop3:
			return nil
		case <-o.ready:
			w.renew()
			for _, m := range o.take() {
				writeEvent(w, m)
			}
		case <-tick.C:
			w.renew()
			_, _ = io.WriteString(w, ":\n\n")
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// listener is one modern host's subscriptions/listen stream.
type listener struct {
	// id is the raw JSON-RPC id of the listen request: the subscription
	// id every notification on the stream carries.
	id  json.RawMessage
	key string
	out *outbox
	// view is the caller's view: it hears of its own list changes only;
	// principal is its identity (policy.Identity.ID).
	view, principal string
	// done is closed to end the stream (a reload changed its
	// credentials); endOnce guards it.
	done    chan struct{}
	endOnce sync.Once

	toolsListChanged, promptsListChanged, resourcesListChanged bool
}

// end ends the listener's stream.
func (l *listener) end() { l.endOnce.Do(func() { close(l.done) }) }

// wants reports whether the listener asked for a list change.
func (l *listener) wants(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.toolsListChanged
	case "notifications/prompts/list_changed":
		return l.promptsListChanged
	case "notifications/resources/list_changed":
		return l.resourcesListChanged
	}
	return false
}

// tagged renders a notification for the listener's stream, with its
// subscription id in _meta (2026-07-28 basic/patterns/subscriptions).
func (l *listener) tagged(method string, params json.RawMessage) []byte {
	meta, _ := jsonrpc.Field(params, "_meta")
	meta, err := jsonrpc.SetField(meta, metaSubscriptionID, l.id)
	if err == nil {
		if p, err := jsonrpc.SetField(params, "_meta", meta); err == nil {
			params = p
		}
	}
	return jsonrpc.AppendNotification(nil, method, params)
}

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// Deliver hands a change to the hosts that should hear of it: list
// changes to every legacy session and to the listen streams that asked,
// a change of one caller's own list (Session, ForPrincipal) to that
// caller only, resource updates to their subscribers. It never blocks.
func (s *Server) Deliver(c router.Change) {
	s.mu.Lock()
	var sessions []*session
	var listeners []*listener
	switch {
	case c.Session != "":
		if ss := s.sessions[c.Session]; ss != nil && ss.view == c.View {
			sessions = append(sessions, ss)
		}
	case c.Subscribers == nil:
		for _, ss := range s.sessions {
			if ss.view == c.View && !c.ForPrincipal {
				sessions = append(sessions, ss)
			}
		}
		for l := range s.listeners {
			if l.view == c.View && l.wants(c.Method) && (!c.ForPrincipal || l.principal == c.Principal) {
				listeners = append(listeners, l)
			}
		}
	default:
		for _, key := range c.Subscribers {
			if ss := s.sessions[key]; ss != nil {
				sessions = append(sessions, ss)
			}
			if l := s.listenersByKey[key]; l != nil {
				listeners = append(listeners, l)
			}
		}
	}
	s.mu.Unlock()
	if n := len(sessions) + len(listeners); n > 0 && strings.HasSuffix(c.Method, "/list_changed") {
		s.listChanged.Add(context.Background(), int64(n), metric.WithAttributes(telemetry.AttrMethod.String(c.Method)))
	}
	plain := jsonrpc.AppendNotification(nil, c.Method, c.Params)
	for _, ss := range sessions {
		if !ss.out.push(plain) {
			s.log.Warn("session outbox full: notification dropped", telemetry.KeySession, ss.id, telemetry.KeyMethod, c.Method)
		}
	}
	for _, l := range listeners {
		if !l.out.push(l.tagged(c.Method, c.Params)) {
			s.log.Warn("listen stream outbox full: notification dropped", "subscription", l.key, telemetry.KeyMethod, c.Method)
		}
	}
}

// listen serves a modern subscriptions/listen request: it acknowledges
// the filter it honours, then streams the matching notifications until
// the host closes the stream or the gateway shuts down.
func (s *Server) listen(w http.ResponseWriter, r *http.Request, caller *router.Caller, msg *jsonrpc.Message) {
	f, err := parseListenFilter(msg.Params)
	if err == nil && len(f.ResourceSubscriptions) > config.DefaultMaxListenURIs {
		// Each URI may be an upstream subscription of its own.
		err = fmt.Errorf("at most %d resourceSubscriptions in one subscriptions/listen, not %d", config.DefaultMaxListenURIs, len(f.ResourceSubscriptions))
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return
	}
	if e := f.refuse(caller); e != nil {
		writeError(w, http.StatusBadRequest, msg.ID, e)
		return
	}
	f.ResourceSubscriptions = distinct(f.ResourceSubscriptions)
	team, _ := policy.SplitViewKey(caller.View)
	release, quota := s.takeStream(policy.Identity{ID: caller.Principal, Team: team})
	if release == nil {
		s.tooManyStreams(w, msg.ID, quota)
		return
	}
	defer release()
	s.mu.Lock()
	s.nextListener++
	l := f.listener(msg.ID, "listen-"+strconv.FormatUint(s.nextListener, 10))
	l.view, l.principal, l.done = caller.View, caller.Principal, make(chan struct{})
	closing := s.closing
	s.listeners[l] = struct{}{}
	s.listenersByKey[l.key] = l
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		delete(s.listenersByKey, l.key)
		s.mu.Unlock()
		s.d.HostGone(l.key)
	}()
	ack := f.acknowledge(func(uri string) bool {
		e := s.d.SubscribeResource(r.Context(), caller, l.key, uri)
		if e != nil {
			s.log.Info("resource subscription not honoured", "uri", uri, telemetry.KeyErr, e)
		}
		return e == nil
	})
	out := newDeadlineWriter(w, s.opts.WriteTimeout)
	out.renew()
	startSSE(w)
	writeEvent(out, l.tagged("notifications/subscriptions/acknowledged", ack))
	if err := out.Flush(); err != nil {
		return
	}
	if err := pump(out, l.out, s.opts.KeepAlive, r.Context().Done(), closing, l.done); err != nil {
		s.log.Info("listen stream cut off: the host does not read it", "subscription", l.key, telemetry.KeyErr, err)
		return
	}
	if r.Context().Err() == nil {
		// The gateway ends the subscription: a result says it ended
		// gracefully, not by a dropped connection.
		result := `{"resultType":"complete","_meta":{"` + metaSubscriptionID + `":` + string(l.id) + `}}`
		out.renew()
		writeEvent(out, jsonrpc.AppendResult(nil, l.id, json.RawMessage(result)))
		_ = out.Flush()
	}
}

// distinct returns uris without repeats, in their first order.
func distinct(uris []string) []string {
	seen := make(map[string]bool, len(uris))
	out := uris[:0]
	for _, u := range uris {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// listenFilter is the notifications filter of subscriptions/listen.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged"`
	PromptsListChanged    bool     `json:"promptsListChanged"`
	ResourcesListChanged  bool     `json:"resourcesListChanged"`
	ResourceSubscriptions []string `json:"resourceSubscriptions"`
	// TaskIDs asks for notifications/tasks (the tasks extension), which
	// the gateway does not send: hosts poll tasks/get. The acknowledgement
	// says so with an empty list.
	TaskIDs []string `json:"taskIds"`
}

// refuse is the error for a filter the caller may not ask for: task
// notifications without the tasks extension (ext-tasks "Task Status
// Notifications": -32021); nil when it may.
func (f *listenFilter) refuse(caller *router.Caller) *jsonrpc.Error {
	if f.TaskIDs == nil || caller.TakesTasks() {
		return nil
	}
	return router.MissingTasksExtension("taskIds")
}

func parseListenFilter(params json.RawMessage) (*listenFilter, error) {
	var p struct {
		Notifications listenFilter `json:"notifications"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	return &p.Notifications, nil
}

// listener returns a listener for the filter's list changes.
func (f *listenFilter) listener(id json.RawMessage, key string) *listener {
	return &listener{
		id: append(json.RawMessage(nil), id...), key: key, out: newOutbox(),
		toolsListChanged: f.ToolsListChanged, promptsListChanged: f.PromptsListChanged, resourcesListChanged: f.ResourcesListChanged,
	}
}

// acknowledge subscribes each resource URI with subscribe and returns the
// params of the acknowledgment: the part of the filter the gateway
// honours.
func (f *listenFilter) acknowledge(subscribe func(uri string) bool) json.RawMessage {
	ack := map[string]any{}
	if f.ToolsListChanged {
		ack["toolsListChanged"] = true
	}
	if f.PromptsListChanged {
		ack["promptsListChanged"] = true
	}
	if f.ResourcesListChanged {
		ack["resourcesListChanged"] = true
	}
	if len(f.ResourceSubscriptions) > 0 {
		acked := []string{}
		for _, uri := range f.ResourceSubscriptions {
			if subscribe(uri) {
				acked = append(acked, uri)
			}
		}
		ack["resourceSubscriptions"] = acked
	}
	if f.TaskIDs != nil {
		ack["taskIds"] = []string{}
	}
	params, _ := json.Marshal(map[string]any{"notifications": ack})
	return params
}
