package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/policy"
)

// Console sessions: a browser cannot send Authorization on an
// EventSource, so a person logs in once with a key or token and gets a
// session cookie. The session holds the credential (in memory only) and
// checks it again as it is used, so that a key removed by a reload, or a
// token that expired, ends the session at once.
const (
	// sessionIdle ends a session unused for this long; sessionMax ends
	// any session this long after its login.
	sessionIdle = 30 * time.Minute
	sessionMax  = 12 * time.Hour
	// maxSessions bounds the sessions kept: a new login past it ends the
	// least recently used one.
	maxSessions = 1000
	// recheckEvery is how often a session's credential is checked again
	// while it is used (a page, an event stream's refresh).
	recheckEvery = 5 * time.Second
)

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
	checkedAt time.Time
	streams   int
	// flash is a message for the next page (an approval's outcome).
	flash      string
	flashError bool
}

// sessions holds the console's sessions.
type sessions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
}

// newToken returns 32 random bytes, base64url: a cookie value or a CSRF
// token.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create makes a session for who, logged in with token, and returns the
// cookie's value.
func (ss *sessions) create(who policy.Identity, admin bool, token string, now time.Time) (string, *session) {
	value := newToken()
	s := &session{key: sha256.Sum256([]byte(value)), csrf: newToken(), token: token, created: now,
		who: who, admin: admin, seen: now, checkedAt: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire(now)
	if len(ss.m) >= maxSessions {
		var oldest *session
		for _, o := range ss.m {
			if oldest == nil || o.seen.Before(oldest.seen) {
				oldest = o
			}
		}
		delete(ss.m, oldest.key)
	}
	ss.m[s.key] = s
	return value, s
}

// get returns the live session of a cookie's value, marked as used.
func (ss *sessions) get(value string, now time.Time) *session {
	if value == "" {
		return nil
	}
	k := sha256.Sum256([]byte(value))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[k]
	if s == nil {
		return nil
	}
	if s.expired(now) {
		delete(ss.m, k)
		return nil
	}
	s.seen = now
	return s
}

// drop ends s.
func (ss *sessions) drop(s *session) {
	ss.mu.Lock()
	delete(ss.m, s.key)
	ss.mu.Unlock()
}

// alive reports whether s is still kept.
func (ss *sessions) alive(s *session) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[s.key] == s
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
