package upstream

import (
	"context"
	"errors"
	"sync"
)

// errQueueFull: every slot is taken and the queue is full.
var errQueueFull = errors.New("queue full")

// limiter bounds the calls in flight on a connection (Options.MaxInFlight)
// and the calls waiting for a slot (Options.MaxQueue). Waiters are served
// first come, first served: a channel's blocked senders form a queue.
type limiter struct {
	slots    chan struct{} // one element per call in flight
	maxQueue int

	mu      sync.Mutex // guards waiting
	waiting int
}

func newLimiter(inflight, queue int) *limiter {
	return &limiter{slots: make(chan struct{}, inflight), maxQueue: queue}
}

// acquire takes a slot, waiting in the queue until ctx or dead is done.
// It returns errQueueFull at once when the queue is full, ErrClosed when
// dead is closed first, and ctx's error when ctx ends first. A nil
// limiter admits everything.
func (l *limiter) acquire(ctx context.Context, dead <-chan struct{}) error {
	if l == nil {
		return nil
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	l.mu.Lock()
	if l.waiting >= l.maxQueue {
		l.mu.Unlock()
		return errQueueFull
	}
	l.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-dead:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release frees the slot acquire took.
func (l *limiter) release() {
	if l != nil {
		<-l.slots
	}
}
