package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// Call sends one request with params of the caller's own (valid JSON, or
// nil for none); see Send.
func (c *Client) Call(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	return c.Send(ctx, jsonrpc.NewOutgoing(method, params))
}

// Send sends one request and returns the server's response: a message
// with Result or Error set. A JSON-RPC error from the server is not a Go
// error. Go errors are transport failures: ErrClosed, ErrNotReady,
// ErrTimeout (Options.Timeout elapsed; on stdio and legacy transports the
// server is sent notifications/cancelled), the context's error,
// ErrMalformed, or an HTTP status the server answered with.
//
// On a modern server, params._meta gets the negotiated protocol version
// (replacing the caller's), the caller's client capabilities or {}, and
// the gateway's client info unless the caller gave one; on a legacy
// server those three keys are removed. These are rewrites of req, which
// is then encoded once; the rest of its params is sent byte for byte.
//
// With a context from WithCallHandler, what the server sends on the call's
// own Streamable HTTP response stream goes to that CallHandler; see
// CallHandler. Cancelling ctx cancels the request upstream.
//
// The response's ID is the Client's own id for the request, not the
// caller's. Its raw fields alias a read buffer shared with neighbouring
// messages: copy what is kept long.
func (c *Client) Send(ctx context.Context, req *jsonrpc.Outgoing) (*jsonrpc.Message, error) {
	method := req.Method
	w, err := c.readyWire(method)
	if err != nil {
		return nil, err
	}
	header, err := c.prepare(ctx, req)
	if err != nil {
		return nil, c.errorf(method, fmt.Errorf("%w: %w", errInvalidParams, err))
	}
	// The clock starts before the wait for a slot: Timeout bounds the
	// caller's whole wait.
	d := newDeadline(ctx, c.timeout, c.maxTimeout)
	defer d.stop()
	if err := c.slots.acquire(d.ctx, c.dead); err != nil {
		return nil, c.admitErr(ctx, method, err)
	}
	defer c.slots.release()
	defer c.watchProgress(progressToken(req), d)()
	return c.roundTrip(ctx, w, method, nil, callOpts{req: req, deadline: d, header: header, handler: callHandlerFrom(ctx)})
}

// errInvalidParams: the caller's params could not be prepared; nothing
// was sent.
var errInvalidParams = errors.New("invalid params")

// admitErr is the error of a call that got no slot.
func (c *Client) admitErr(ctx context.Context, method string, err error) error {
	switch {
	case errors.Is(err, ErrClosed):
		return c.closedErr(method)
	case errors.Is(err, errQueueFull):
		return fmt.Errorf("upstream %q: %s: %w: %d calls in flight and %d waiting", c.opts.Name, method, ErrOverloaded, cap(c.slots.slots), c.slots.maxQueue)
	case ctx.Err() != nil:
		return c.errorf(method, ctx.Err())
	}
	return fmt.Errorf("upstream %q: %s: %w: no free slot within %v (%d calls in flight)", c.opts.Name, method, ErrOverloaded, c.timeout, cap(c.slots.slots))
}

// Notify sends a notification. params is sent as given.
func (c *Client) Notify(ctx context.Context, method string, params json.RawMessage) error {
	w, err := c.readyWire(method)
	if err != nil {
		return err
	}
	return c.notify(ctx, w, method, params, false)
}

func (c *Client) notify(ctx context.Context, w wire, method string, params json.RawMessage, handshake bool) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out := &outgoing{method: method, data: jsonrpc.AppendNotification(nil, method, params), handshake: handshake}
	if err := w.send(ctx, out); err != nil {
		return c.sendErr(ctx, ctx, method, err, c.timeout.String())
	}
	return nil
}

type callOpts struct {
	// req, if set, is the request to encode; otherwise the params given
	// to roundTrip are sent as they are.
	req *jsonrpc.Outgoing
	// deadline, if set, bounds the call (Send and Call); otherwise timeout does,
	// and 0 means none (a subscription).
	deadline *deadline
	timeout  time.Duration
	header   http.Header
	// handler, if set, receives the messages of the request's own
	// response stream (Streamable HTTP).
	handler CallHandler
	// listen: a subscriptions/listen request; handler also receives the
	// notifications tagged with its id on a shared stream (stdio).
	listen bool
	// noCancel: do not send notifications/cancelled when the call is
	// abandoned (the server/discover probe, which a legacy server has not
	// accepted as a request).
	noCancel  bool
	handshake bool
	// drain, after a cancellation, waits this long for the server's
	// answer to the cancelled request, so that the server has finished
	// with it (see Client.Subscribe on stdio).
	drain time.Duration
}

// after says how long the call had, for ErrTimeout's message.
func (o *callOpts) after() string {
	if o.deadline != nil {
		return o.deadline.describe()
	}
	return o.timeout.String()
}

// roundTrip sends a request on w and waits for its response.
func (c *Client) roundTrip(ctx context.Context, w wire, method string, params json.RawMessage, o callOpts) (*jsonrpc.Message, error) {
	var (
		tctx   context.Context
		cancel context.CancelFunc
	)
	switch {
	case o.deadline != nil:
		tctx, cancel = o.deadline.ctx, func() {}
	case o.timeout > 0:
		tctx, cancel = context.WithTimeout(ctx, o.timeout)
	default:
		tctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	id := c.nextID.Add(1)
	ch := make(chan callResult, 1)
	c.mu.Lock()
	if c.deadErr != nil {
		c.mu.Unlock()
		return nil, c.closedErr(method)
	}
	c.pending[id] = ch
	if o.listen {
		c.listeners[id] = o.handler
	}
	dead := c.dead
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		delete(c.listeners, id)
		c.mu.Unlock()
	}()

	idRaw := strconv.AppendInt(nil, id, 10)
	out := &outgoing{id: id, method: method, header: o.header, handshake: o.handshake, handler: o.handler}
	if o.req != nil {
		out.data = o.req.AppendRequest(make([]byte, 0, o.req.SizeHint()+len(method)+64), idRaw)
		out.req = o.req
	} else {
		out.data = jsonrpc.AppendRequest(make([]byte, 0, len(params)+len(method)+64), idRaw, method, params)
	}
	if err := w.send(tctx, out); err != nil {
		select {
		case r := <-ch:
			return c.result(method, r)
		default:
		}
		// A stdio message that could not be handed to the writer never
		// reached the server; anything else may have.
		if _, stdio := w.(*stdioWire); tctx.Err() != nil && !o.noCancel && !stdio {
			c.cancelRemote(w, id)
		}
		return nil, c.sendErr(ctx, tctx, method, err, o.after())
	}
	select {
	case r := <-ch:
		return c.result(method, r)
	case <-tctx.Done():
		if !o.noCancel {
			c.cancelRemote(w, id)
		}
		if o.drain > 0 {
			t := time.NewTimer(o.drain)
			defer t.Stop()
			select {
			case <-ch:
			case <-dead:
			case <-t.C:
			}
		}
		return nil, c.ctxErr(ctx, method, o.after())
	case <-dead:
		select {
		case r := <-ch:
			return c.result(method, r)
		default:
		}
		return nil, c.closedErr(method)
	}
}

func (c *Client) result(method string, r callResult) (*jsonrpc.Message, error) {
	if r.err != nil {
		return nil, c.errorf(method, r.err)
	}
	return r.msg, nil
}

// sendErr maps an error from a wire's send; after says how long the
// request had.
func (c *Client) sendErr(ctx, tctx context.Context, method string, err error, after string) error {
	c.mu.Lock()
	dead := c.deadErr != nil
	c.mu.Unlock()
	switch {
	case dead:
		return c.closedErr(method)
	case tctx.Err() != nil:
		return c.ctxErr(ctx, method, after)
	}
	return c.errorf(method, err)
}

// ctxErr is the error for a call whose context (or timeout) is done;
// after says how long the request had.
func (c *Client) ctxErr(ctx context.Context, method, after string) error {
	if err := ctx.Err(); err != nil {
		return c.errorf(method, err)
	}
	return fmt.Errorf("upstream %q: %s: %w after %s", c.opts.Name, method, ErrTimeout, after)
}

// cancelRemote tells the server to stop working on request id. Over modern
// Streamable HTTP closing the response stream is the cancellation (spec
// 2026-07-28, streamable-http "Cancellation"), so nothing is sent.
func (c *Client) cancelRemote(w wire, id int64) {
	if hw, ok := w.(*httpWire); ok && hw.isModern() {
		return
	}
	params := json.RawMessage(`{"requestId":` + strconv.FormatInt(id, 10) + `,"reason":"request abandoned by the gateway"}`)
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(c.life, notifyTimeout)
		defer cancel()
		out := &outgoing{method: "notifications/cancelled", data: jsonrpc.AppendNotification(nil, "notifications/cancelled", params)}
		if err := w.send(ctx, out); err != nil {
			c.log.Debug("upstream cancellation not sent", "err", err)
		}
	})
}

// deliver routes one message from the server: a response to its pending
// call, a notification of a subscription to its listener, another
// notification to OnNotification, a request to OnRequest.
func (c *Client) deliver(m *jsonrpc.Message) {
	if !m.IsResponse() {
		c.heard.Add(1) // a response counts only if a call still waits for it
	}
	switch {
	case m.IsResponse():
		id, ok := jsonrpc.Int64ID(m.ID)
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		switch {
		case m.Error != nil && string(m.ID) == "null":
			// The server could not read a request of ours.
			c.log.Warn("upstream error without a request id", "code", m.Error.Code, "message", m.Error.Message)
			return
		case !ok || ch == nil:
			// A late answer, such as one to a probe that timed out.
			c.log.Debug("upstream response to no pending request", "id", jsonrpc.IDString(m.ID))
			return
		}
		// A late answer (above) says nothing of the server's health: it
		// may come from a server that answers everyone past the timeout.
		c.heard.Add(1)
		ch <- callResult{msg: m}
	case m.IsNotification():
		c.progressed(m)
		if id, ok := subscriptionID(m); ok {
			c.mu.Lock()
			h := c.listeners[id]
			c.mu.Unlock()
			if h != nil {
				c.notifyHandler(h, m)
				return
			}
			if m.Method == methodAcknowledged {
				return // of a subscription already closed
			}
		}
		if m.Method == "notifications/cancelled" && c.listenCancelled(m) {
			return
		}
		c.notifyOptions(m)
	default:
		c.serveRequest(c.life, m, nil)
	}
}

// notifyOptions passes a notification to Options.OnNotification, without
// the subscription id a modern server tags it with (it means nothing past
// this Client).
func (c *Client) notifyOptions(m *jsonrpc.Message) {
	if c.opts.OnNotification != nil {
		m = stripSubscriptionID(m)
		c.safely("OnNotification", func() { c.opts.OnNotification(m) })
	}
}

func (c *Client) notifyHandler(h CallHandler, m *jsonrpc.Message) {
	c.safely("CallHandler.Notify", func() { h.Notify(m) })
}

// listenCancelled handles a notifications/cancelled from the server: on
// stdio a modern server ends a subscription with one naming its
// subscriptions/listen request (spec 2026-07-28, patterns/cancellation).
// It reports whether the notification named such a request.
func (c *Client) listenCancelled(m *jsonrpc.Message) bool {
	raw, _ := jsonrpc.Field(m.Params, "requestId")
	id, ok := jsonrpc.Int64ID(raw)
	if !ok {
		return false
	}
	c.mu.Lock()
	_, listening := c.listeners[id]
	c.mu.Unlock()
	if !listening {
		return false
	}
	reason, _ := jsonrpc.StringField(m.Params, "reason")
	c.fail(id, fmt.Errorf("the server ended the subscription: %q", reason))
	return true
}

// fail ends the pending call id with err.
func (c *Client) fail(id int64, err error) {
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- callResult{err: err}
	}
}

// safely calls a callback, logging a panic instead of crashing the
// goroutine that reads the server.
func (c *Client) safely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("upstream callback panicked", "callback", what, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// serveRequest answers a request from the server on its own goroutine:
// with h when it came on the response stream of a call made with a
// CallHandler (ctx is then that call's), otherwise with Options.OnRequest
// (ctx is the Client's life).
func (c *Client) serveRequest(ctx context.Context, req *jsonrpc.Message, h CallHandler) {
	c.mu.Lock()
	w := c.w
	c.mu.Unlock()
	if w == nil {
		return
	}
	c.spawn(func() {
		var resp *jsonrpc.Message
		switch {
		case h != nil:
			c.safely("CallHandler.Request", func() { resp = h.Request(ctx, req) })
		default:
			resp = c.answerOptions(ctx, req)
		}
		if resp == nil {
			resp = &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "the gateway could not answer %s", req.Method)}
		}
		out := *resp
		out.ID, out.Method, out.Params = req.ID, "", nil
		if out.Error == nil && out.Result == nil {
			out.Result = json.RawMessage("{}")
		}
		ctx, cancel := context.WithTimeout(c.life, notifyTimeout)
		defer cancel()
		if err := w.send(ctx, &outgoing{data: out.Append(nil)}); err != nil {
			c.log.Debug("upstream answer to a server request not sent", "method", req.Method, "err", err)
		}
	})
}

// answerOptions answers a server request with Options.OnRequest, or the
// default answer.
func (c *Client) answerOptions(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	var resp *jsonrpc.Message
	c.safely("OnRequest", func() {
		if c.opts.OnRequest != nil {
			resp = c.opts.OnRequest(ctx, req)
		} else {
			resp = defaultAnswer(req)
		}
	})
	return resp
}

func defaultAnswer(req *jsonrpc.Message) *jsonrpc.Message {
	if req.Method == "ping" {
		return &jsonrpc.Message{Result: json.RawMessage("{}")}
	}
	return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "method not found: the gateway does not handle %q from upstream servers", req.Method)}
}
