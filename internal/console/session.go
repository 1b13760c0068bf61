package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// Console sessions: a browser cannot send Authorization on an
// EventSource, so a person logs in once with a key or token and gets a
// session cookie, a random value. The session holds the credential (in
// memory, and sealed in Redis when shared) and checks it again as it is
// used, so that a key removed by a reload, or a token that expired, ends
// the session at once.
const (
	// sessionIdle ends a session unused for this long; sessionMax ends
	// any session this long after its login.
	sessionIdle = 30 * time.Minute
	sessionMax  = 12 * time.Hour
	// maxSessions bounds the sessions a replica keeps: a new one past it
	// ends the least recently used one here.
	maxSessions = 1000
	// recheckEvery is how often a session's credential is checked again
	// while it is used (a page, an event stream's refresh), and, when
	// shared, whether it still is in Redis (ended elsewhere, or expired
	// unused everywhere), which gives it sessionIdle more there.
	recheckEvery = 5 * time.Second
	// sharedTimeout bounds each Redis request of a session.
	sharedTimeout = 2 * time.Second
	// maxSessionsPerIdentity bounds one identity's sessions on a
	// replica: its next login ends its own least recently used one, so
	// that logging in again and again pushes out no one else's.
	maxSessionsPerIdentity = 8
	// maxEnded bounds the sessions ended here that are remembered, so
	// that a shared one is not taken over again from Redis when its end
	// did not reach Redis (down at the logout).
	maxEnded = 10000
)

// Shared keeps console sessions for every replica (*state.Store under
// state.store redis): a browser logged in through one replica is served
// by any, and a logout ends its session on all.
type Shared interface {
	PutConsoleSession(ctx context.Context, digest string, value []byte, ttl time.Duration) error
	// ConsoleSession returns state.ErrNoConsoleSession when the session
	// is not (or no longer) there.
	ConsoleSession(ctx context.Context, digest string, ttl time.Duration) ([]byte, error)
	EndConsoleSession(ctx context.Context, digest string) error
}

// session is one logged-in browser.
type session struct {
	// key is the SHA-256 of the cookie's value, by which it is kept.
	key  [sha256.Size]byte
	csrf string
	// token is the credential it logged in with; "" without
	// authentication.
	token   string
	created time.Time

	// Guarded by sessions.mu.
	who       policy.Identity
	admin     bool
	seen      time.Time
	checkedAt time.Time // zero: check at once (a session taken over from Redis)
	// flash is a message for the next page (an approval's outcome).
	flash      string
	flashError bool
}

// record is what Redis keeps of a session: what another replica needs to
// take it over.
type record struct {
	Token   string `json:"t"`
	CSRF    string `json:"c"`
	Created int64  `json:"at"`
}

// sessions holds the console's sessions.
type sessions struct {
	shared Shared // nil: this process's only
	log    *slog.Logger

	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
	// ended holds the shared sessions ended here, until they would have
	// expired (sessionMax after their login).
	ended map[[sha256.Size]byte]time.Time
}

// newToken returns 32 random bytes, base64url: a cookie value or a CSRF
// token.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *session) digest() string { return hex.EncodeToString(s.key[:]) }

// create makes a session for who, logged in with token, and returns the
// cookie's value. Shared, it is recorded in Redis too; Redis down, it
// works on this replica only (logged).
func (ss *sessions) create(ctx context.Context, who policy.Identity, admin bool, token string, now time.Time) (string, *session) {
	value := newToken()
	s := &session{key: sha256.Sum256([]byte(value)), csrf: newToken(), token: token, created: now,
		who: who, admin: admin, seen: now, checkedAt: now}
	if ss.shared != nil {
		rec, _ := json.Marshal(record{Token: token, CSRF: s.csrf, Created: now.Unix()}) // strings and a number always marshal
		ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
		err := ss.shared.PutConsoleSession(ctx, s.digest(), rec, sessionIdle)
		cancel()
		if err != nil {
			ss.log.Warn("console session not shared with the other replicas: it works on this one only", telemetry.KeyErr, err)
		}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.keep(s, now)
	return value, s
}

// keep adds s, ending here the least recently used session of its
// identity when it has maxSessionsPerIdentity, else the least recently
// used of all when full; ss.mu is held.
func (ss *sessions) keep(s *session, now time.Time) {
	ss.expire(now)
	var oldest, oldestOwn *session
	own := 0
	for _, o := range ss.m {
		if oldest == nil || o.seen.Before(oldest.seen) {
			oldest = o
		}
		if s.who.ID != "" && o.who.ID == s.who.ID || s.token != "" && o.token == s.token {
			own++
			if oldestOwn == nil || o.seen.Before(oldestOwn.seen) {
				oldestOwn = o
			}
		}
	}
	switch {
	case own >= maxSessionsPerIdentity:
		delete(ss.m, oldestOwn.key)
	case len(ss.m) >= maxSessions:
		delete(ss.m, oldest.key)
	}
	ss.m[s.key] = s
}

// get returns the live session of a cookie's value, marked as used:
// this replica's, or one another replica recorded in Redis, taken over
// (its credential then checked at once).
func (ss *sessions) get(ctx context.Context, value string, now time.Time) *session {
	if value == "" {
		return nil
	}
	k := sha256.Sum256([]byte(value))
	ss.mu.Lock()
	s := ss.m[k]
	if s != nil {
		if s.expired(now) {
			delete(ss.m, k)
			s = nil
		} else {
			s.seen = now
		}
	}
	ss.mu.Unlock()
	if s != nil || ss.shared == nil {
		return s
	}
	ss.mu.Lock()
	_, gone := ss.ended[k]
	ss.mu.Unlock()
	if gone {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	raw, err := ss.shared.ConsoleSession(ctx, hex.EncodeToString(k[:]), sessionIdle)
	if err != nil {
		if !errors.Is(err, state.ErrNoConsoleSession) {
			ss.log.Warn("cannot read a console session from Redis", telemetry.KeyErr, err)
		}
		return nil
	}
	var rec record
	if json.Unmarshal(raw, &rec) != nil || rec.CSRF == "" {
		return nil
	}
	s = &session{key: k, csrf: rec.CSRF, token: rec.Token, created: time.Unix(rec.Created, 0), seen: now}
	if now.Sub(s.created) > sessionMax {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if o := ss.m[k]; o != nil { // taken over at the same time
		return o
	}
	ss.keep(s, now)
	return s
}

// stillShared reports whether a shared session is still in Redis (not
// ended on another replica, not expired unused everywhere), giving it
// sessionIdle more there. Redis down, the session goes on here.
func (ss *sessions) stillShared(ctx context.Context, s *session) bool {
	if ss.shared == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	_, err := ss.shared.ConsoleSession(ctx, s.digest(), sessionIdle)
	if err != nil && !errors.Is(err, state.ErrNoConsoleSession) {
		ss.log.Warn("cannot check a console session in Redis: it goes on here", telemetry.KeyErr, err)
		return true
	}
	return err == nil
}

// drop ends s, on every replica when shared: this one remembers it
// ended, in case Redis does not hear of it.
func (ss *sessions) drop(ctx context.Context, s *session) {
	ss.mu.Lock()
	if ss.m[s.key] == s {
		delete(ss.m, s.key)
	}
	if ss.shared != nil {
		now := time.Now()
		if len(ss.ended) >= maxEnded {
			for k, until := range ss.ended {
				if until.Before(now) || len(ss.ended) >= maxEnded {
					delete(ss.ended, k)
				}
			}
		}
		ss.ended[s.key] = s.created.Add(sessionMax)
	}
	ss.mu.Unlock()
	if ss.shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	if err := ss.shared.EndConsoleSession(ctx, s.digest()); err != nil {
		ss.log.Warn("cannot end a console session in Redis: this replica ended it, the others end it when it expires there unused", telemetry.KeyErr, err)
	}
}

// touch marks s as used (an open event stream is use) and reports
// whether it is still kept.
func (ss *sessions) touch(s *session, now time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m[s.key] != s || s.expired(now) {
		return false
	}
	s.seen = now
	return true
}

func (s *session) expired(now time.Time) bool {
	return now.Sub(s.seen) > sessionIdle || now.Sub(s.created) > sessionMax
}

// expire drops the expired sessions; ss.mu is held.
func (ss *sessions) expire(now time.Time) {
	for k, s := range ss.m {
		if s.expired(now) {
			delete(ss.m, k)
		}
	}
}
