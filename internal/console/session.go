package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
	// maxEnded bounds the ended sessions remembered (sessions.ended):
	// past it the expired ones are forgotten, then any, so that a flood
	// of logins and logouts cannot grow it.
	maxEnded = 10 * maxSessions
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

// Sealer seals a session into its cookie (*state.Sealer, with
// state.key), so that every replica opens the cookies of the others.
type Sealer interface {
	Seal(prefix string, plain []byte) string
	Open(prefix, text string) ([]byte, bool)
}

// sealPrefix starts a sealed session cookie's value, and is the purpose
// it is sealed for.
const sealPrefix = "mcpgw-console."

// sealed is what a session's cookie carries, sealed: what another
// replica needs to take the session over.
type sealed struct {
	Token   string `json:"t"`
	CSRF    string `json:"c"`
	Created int64  `json:"at"`
}

// sessions holds the console's sessions.
type sessions struct {
	// seal, when set, seals each session into its cookie; nil keeps
	// sessions in this process, the cookie a random key to them.
	seal Sealer

	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
	// ended holds the sessions ended here (logout, a credential that no
	// longer opens), until they would have expired, so that their
	// sealed cookies are not taken over again.
	ended map[[sha256.Size]byte]time.Time
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
	csrf := newToken()
	value := newToken()
	if ss.seal != nil {
		plain, _ := json.Marshal(sealed{Token: token, CSRF: csrf, Created: now.Unix()}) // strings and a number always marshal
		value = ss.seal.Seal(sealPrefix, plain)
	}
	s := &session{key: sha256.Sum256([]byte(value)), csrf: csrf, token: token, created: now,
		who: who, admin: admin, seen: now, checkedAt: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.keep(s, now)
	return value, s
}

// keep adds s, ending the least recently used session when full; ss.mu
// is held.
func (ss *sessions) keep(s *session, now time.Time) {
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
}

// adopt takes over the session sealed in a cookie's value (made by
// another replica, or by this one before a restart): its credential is
// checked at once (checkedAt is zero). nil when the value is not a
// sealed session, is too old, or ended here.
func (ss *sessions) adopt(value string, k [sha256.Size]byte, now time.Time) *session {
	if ss.seal == nil {
		return nil
	}
	if _, gone := ss.ended[k]; gone {
		return nil
	}
	plain, ok := ss.seal.Open(sealPrefix, value)
	if !ok {
		return nil
	}
	var sl sealed
	if json.Unmarshal(plain, &sl) != nil || sl.CSRF == "" {
		return nil
	}
	s := &session{key: k, csrf: sl.CSRF, token: sl.Token, created: time.Unix(sl.Created, 0), seen: now}
	if now.Sub(s.created) > sessionMax || s.created.After(now.Add(time.Minute)) {
		return nil
	}
	ss.keep(s, now)
	return s
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
		if s = ss.adopt(value, k, now); s == nil {
			return nil
		}
	}
	if s.expired(now) {
		delete(ss.m, k)
		return nil
	}
	s.seen = now
	return s
}

// drop ends s; its cookie is not taken over here again.
func (ss *sessions) drop(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, s.key)
	if ss.seal == nil {
		return
	}
	until := s.created.Add(sessionMax)
	if len(ss.ended) >= maxEnded {
		now := time.Now()
		for k, t := range ss.ended {
			if t.Before(now) || len(ss.ended) >= maxEnded {
				delete(ss.ended, k)
			}
		}
	}
	ss.ended[s.key] = until
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
