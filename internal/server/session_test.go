package server

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

func TestIdleSessionsExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(&fakeDispatcher{}, &Options{MaxSessions: 2, SessionIdleTimeout: time.Minute})
		a, err := s.newSession("2025-11-25", policy.Identity{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := s.newSession("2025-11-25", policy.Identity{})
		// Both hold GET streams: no session can make room.
		for _, ss := range []*session{a, b} {
			ss.mu.Lock()
			ss.streaming = true
			ss.mu.Unlock()
		}
		if _, err := s.newSession("2025-11-25", policy.Identity{}); !errors.Is(err, errTooManySessions) {
			t.Fatalf("third session with room for two, both streaming: err = %v, want errTooManySessions", err)
		}

		// b holds a GET stream; a is used at 50s, then both wait.
		a.mu.Lock()
		a.streaming = false
		a.mu.Unlock()
		time.Sleep(50 * time.Second)
		if s.lookup(a.id) == nil {
			t.Fatal("a session used within the timeout expired")
		}
		time.Sleep(61 * time.Second)

		// The table is full: a new session expires the idle one (a) but
		// not the streaming one (b).
		c, err := s.newSession("2025-11-25", policy.Identity{})
		if err != nil {
			t.Fatalf("new session after one went idle: %v", err)
		}
		if s.lookup(a.id) != nil {
			t.Error("the idle session is still there")
		}
		select {
		case <-a.done:
		default:
			t.Error("the expired session was not closed")
		}
		if s.lookup(b.id) == nil {
			t.Error("a session with an open GET stream expired")
		}
		time.Sleep(2 * time.Minute)
		if s.lookup(c.id) != nil {
			t.Error("an idle session is served after its timeout")
		}
		s.Close()
	})
}

// lookup is session for a test: the session with this id, or nil.
func (s *Server) lookup(id string) *session {
	ss, _ := s.session(context.Background(), id, policy.Identity{})
	return ss
}
