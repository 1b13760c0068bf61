package server

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
)

// hostLink is what one host connection — a legacy HTTP session, or the
// stdio host — keeps while requests run both ways: the host's requests in
// progress, by raw id, so that notifications/cancelled and the end of the
// connection can cancel them; and the gateway's requests to the host,
// waiting for its answers. The zero value is ready to use.
type hostLink struct {
	mu sync.Mutex // guards the fields below
	// inflight maps the raw ids of the host's requests in progress to
	// the cancel of their contexts.
	inflight map[string]context.CancelFunc
	// waiting maps the ids of the gateway's requests to the host to the
	// channels their answers go to.
	waiting map[string]chan *jsonrpc.Message
}

// track records a request in progress; false when its id is in use.
func (l *hostLink) track(id json.RawMessage, cancel context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight == nil {
		l.inflight = map[string]context.CancelFunc{}
	}
	if _, dup := l.inflight[string(id)]; dup {
		return false
	}
	l.inflight[string(id)] = cancel
	return true
}

func (l *hostLink) untrack(id json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inflight, string(id))
}

// cancel cancels the host's request id (notifications/cancelled); false
// when no such request runs here.
func (l *hostLink) cancel(id json.RawMessage) bool {
	l.mu.Lock()
	cancel := l.inflight[string(id)]
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

// cancelAll cancels every request in progress: the host is gone.
func (l *hostLink) cancelAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cancel := range l.inflight {
		cancel()
	}
}

// expect allocates the id of a request to the host and the channel its
// answer will arrive on; forget must follow.
func (l *hostLink) expect() (json.RawMessage, chan *jsonrpc.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Unguessable, as every identifier the gateway hands out: the id
	// is all a host's answer needs to be taken for the one awaited.
	id := jsonrpc.String("gw-" + newSessionID())
	ch := make(chan *jsonrpc.Message, 1)
	if l.waiting == nil {
		l.waiting = map[string]chan *jsonrpc.Message{}
	}
	l.waiting[string(id)] = ch
	return id, ch
}

func (l *hostLink) forget(id json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiting, string(id))
}

// resolve hands the host's answer to whoever waits for it.
func (l *hostLink) resolve(msg *jsonrpc.Message) bool {
	l.mu.Lock()
	ch := l.waiting[string(msg.ID)]
	delete(l.waiting, string(msg.ID))
	l.mu.Unlock()
	if ch != nil {
		ch <- msg
	}
	return ch != nil
}
