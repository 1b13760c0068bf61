package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// Sessions shared by replicas (Options.Shared, state.store: redis).
//
// A session id is sealed (state.Store.NewSessionID) around what every
// request of the session needs: its version, identity and view. A
// replica keeps the sessions it serves in its table, as a single
// gateway does; one that gets a request for a session it does not hold
// opens the id and reads the session's record from Redis (one round
// trip), and from then on serves it from its table. What changes lives
// in Redis and is told to every replica: the log level, and the end of a
// session (DELETE, or room made for another), which revokes it on every
// replica. A replica's table is a cache: a session it forgets (idle
// here, or the replica stops) lives on for the others until it is idle
// for session_idle_timeout in Redis too.
//
// What a host sends to one replica for a request running on another (its
// answer to an elicitation, a cancellation) is passed on to every replica
// (state.Store.Tell); the one running the request takes it.

// Things a replica passes on for a session (state.Store.Tell).
const (
	tellAnswer    = "answer"
	tellCancelled = "cancelled"
)

// startShared has the store tell this server what other replicas did.
func (s *Server) startShared() {
	if s.opts.Shared == nil {
		return
	}
	s.opts.Shared.Start(state.Handlers{
		Approved: s.opts.Approved,
		Revoked: func(id string) {
			s.mu.Lock()
			s.revokedLocked(id)
			s.mu.Unlock()
			if !s.forget(id) {
				// What the router keeps for the session here (a
				// per-client upstream session its calls were sent to)
				// ends with it too.
				s.d.HostGone(id)
			}
		},
		Level: func(id, level string) {
			if ss := s.localSession(id); ss != nil {
				ss.setLogLevel(level)
			}
		},
		Told: func(id, what string, payload []byte) {
			ss := s.localSession(id)
			if ss == nil {
				return
			}
			switch what {
			case tellAnswer:
				if msg, err := jsonrpc.Decode(payload); err == nil {
					ss.link.resolve(msg)
				}
			case tellCancelled:
				ss.link.cancel(payload)
			}
		},
		Call: s.opts.ServePeer,
	})
}

// localSession returns the session with this id in this replica's
// table; nil when it has none.
func (s *Server) localSession(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// forget drops a session from this replica's table (another replica
// ended it, or it is idle here), ending what it has running here, but not
// the session itself; false when the table did not hold it.
func (s *Server) forget(id string) bool {
	s.mu.Lock()
	ss := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if ss != nil {
		s.ended(ss)
	}
	return ss != nil
}

// revokedFor is how long a replica remembers a shared session that
// ended, against adopting it again from a read that raced the end.
const revokedFor = time.Minute

// revokedLocked remembers that a shared session ended. s.mu is held.
func (s *Server) revokedLocked(id string) {
	if s.opts.Shared == nil {
		return
	}
	now := time.Now()
	if s.revoked == nil {
		s.revoked = map[string]time.Time{}
	}
	for k, until := range s.revoked {
		if now.After(until) {
			delete(s.revoked, k)
		}
	}
	s.revoked[id] = now.Add(revokedFor)
}

// adopt serves a session another replica opened: its id is opened, its
// record read, and the session enters this replica's table. nil, nil
// when there is no such session; an error when Redis does not answer. A
// caller who is not the session's identity, or no longer in its view,
// gets the session without it entering the table (sessionFor refuses
// it), so that nobody else makes a replica adopt a session.
func (s *Server) adopt(ctx context.Context, id string, who policy.Identity) (*session, error) {
	seal, ok := s.opts.Shared.OpenSessionID(id)
	if !ok {
		return nil, nil // not an id of this gateway (or of its current keys)
	}
	if seal.Principal != who.ID || seal.View != who.View() {
		return &session{id: id, version: seal.Version, principal: seal.Principal, key: seal.Key, view: seal.View,
			done: make(chan struct{}), out: newOutbox()}, nil
	}
	rec, err := s.opts.Shared.Session(ctx, id)
	switch {
	case errors.Is(err, state.ErrNoSession):
		return nil, nil
	case err != nil:
		return nil, err
	}
	now := time.Now()
	ss := &session{id: id, version: seal.Version, principal: seal.Principal, key: seal.Key, view: seal.View,
		capabilities: rec.Capabilities, level: rec.Level, done: make(chan struct{}), lastUsed: now, refreshed: now, out: newOutbox()}
	ss.events = randomEvents()
	s.mu.Lock()
	if held := s.sessions[id]; held != nil {
		// Adopted meanwhile by another request.
		s.mu.Unlock()
		return held, nil
	}
	if until, ok := s.revoked[id]; ok && time.Now().Before(until) {
		// Ended while its record was read.
		s.mu.Unlock()
		return nil, nil
	}
	var ended []*session
	if len(s.sessions) >= s.opts.MaxSessions {
		ended = append(ended, s.expireLocked(now)...)
	}
	if len(s.sessions) >= s.opts.MaxSessions {
		if lru := s.roomLocked(); lru != nil {
			ended = append(ended, lru)
		}
	}
	if len(s.sessions) >= s.opts.MaxSessions {
		s.mu.Unlock()
		s.endAll(ended)
		return nil, errTooManySessions
	}
	s.sessions[id] = ss
	s.mu.Unlock()
	s.endAll(ended)
	s.log.Info("session adopted from another replica", telemetry.KeySession, id)
	return ss, nil
}

func (s *Server) endAll(sessions []*session) {
	for _, e := range sessions {
		s.ended(e)
	}
}

// refresh gives a shared session another idle timeout in Redis, at most
// once per eighth of it: no request waits for it.
func (s *Server) refresh(ss *session, now time.Time) {
	if s.opts.Shared == nil {
		return
	}
	ss.mu.Lock()
	due := now.Sub(ss.refreshed) > s.opts.SessionIdleTimeout/8
	if due {
		ss.refreshed = now
	}
	ss.mu.Unlock()
	if due {
		// A record gone from Redis is a session ended (or expired)
		// everywhere: a revocation this replica missed ends it here too.
		s.opts.Shared.TouchSession(ss.id, func() {
			s.log.Info("session ended on another replica", telemetry.KeySession, ss.id)
			s.forget(ss.id)
		})
	}
}

// sharedUnavailable answers a request that needs Redis while it is down.
func sharedUnavailable(w http.ResponseWriter, id []byte, what string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, id, jsonrpc.NewError(jsonrpc.CodeInternalError,
		"Service Unavailable: %s: the gateway's shared session state (Redis) does not answer; try again shortly", what))
}

// tellRate and tellBurst bound what one session has passed on to the
// other replicas: a host's answers and cancellations cost it nothing
// here (they are not rate limited), but each one passed on reaches every
// replica.
const (
	tellRate  = 20 // per second
	tellBurst = 50
)

// tell passes on for a session what belongs to a request running on
// another replica; without shared state there is none. Beyond the
// session's tellRate, it is dropped.
func (s *Server) tell(ss *session, what string, payload []byte) {
	if s.opts.Shared == nil {
		return
	}
	ss.mu.Lock()
	if ss.tells == nil {
		ss.tells = rate.NewLimiter(tellRate, tellBurst)
	}
	ok := ss.tells.Allow()
	ss.mu.Unlock()
	if !ok {
		s.log.Warn("a host's answer or cancellation for no request of this replica dropped: too many", telemetry.KeySession, ss.id)
		return
	}
	id := ss.id
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.opts.Shared.Tell(ctx, id, what, payload); err != nil {
		s.log.Warn("cannot pass a host's message on to the other replicas", telemetry.KeySession, id, telemetry.KeyErr, err)
	}
}

// randomEvents is where a session's event numbers start on a replica: at
// random, so that a session adopted again (after it left the table)
// numbers its events anew without repeating an id.
func randomEvents() uint64 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return uint64(binary.BigEndian.Uint32(b[:])) << 16
}

// eventID names an event on a session's GET stream: this replica, and a
// number of the session's. A host resuming with the id of another replica
// (or of an earlier start of this one) may have missed what that replica
// had for it.
func (s *Server) eventID(ss *session) string {
	ss.mu.Lock()
	ss.events++
	n := ss.events
	ss.mu.Unlock()
	return s.replica + "." + strconv.FormatUint(n, 10)
}

// resumedElsewhere reports whether a GET's Last-Event-ID names another
// replica's (or another start's) stream.
func (s *Server) resumedElsewhere(lastEventID string) bool {
	if lastEventID == "" {
		return false
	}
	rep, _, _ := strings.Cut(lastEventID, ".")
	return rep != s.replica
}
