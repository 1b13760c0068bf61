// Package state holds what the replicas of one gateway share when
// state.store is redis: legacy sessions (their sealed ids, and in Redis
// what changes: capabilities, log level, revocation) and a way for one
// replica to ask another (a modern host's retry of a call parked on
// another replica, a task that runs there).
//
// What a session needs on every call (version, identity, view) travels
// sealed in its id, so a replica serves a session it already knows with
// no Redis round trip; one it has not seen yet costs one read. Messages
// between replicas go through Redis pub/sub, sealed with the same key, so
// that whoever can reach Redis but lacks the key can neither read nor
// forge them.
package state

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

var (
	// ErrUnavailable: Redis did not answer (down, unreachable, refused
	// the credentials); what needs it fails until it is back.
	ErrUnavailable = errors.New("the gateway's shared state (Redis) is unavailable")
	// ErrNoSession: no live session has this id (never was, expired, or
	// deleted on some replica).
	ErrNoSession = errors.New("no such session")
	// ErrReplicaGone: the replica asked is not running (or cannot reach
	// Redis): it never got the call.
	ErrReplicaGone = errors.New("the gateway replica is gone")
	// ErrInterrupted: the replica asked stopped while it ran the call,
	// which may have taken effect.
	ErrInterrupted = errors.New("the gateway replica stopped during the call")
)

// Redis keys and channels, all under one prefix.
const (
	keyPrefix     = "mcpgw:"
	sessionPrefix = keyPrefix + "s:"
	// broadcast carries what every replica hears: a session revoked, its
	// log level changed, the shared approvals changed.
	broadcast = keyPrefix + "all"
	// inboxPrefix + a replica's id is that replica's own channel.
	inboxPrefix = keyPrefix + "r:"
)

// Purposes of sealed values (their associated data).
const (
	sessionIDPrefix = "mcpgw1."
	messagePurpose  = "mcpgw-message"
)

// maxServing bounds the calls from other replicas one replica runs at
// once; more wait for a slot.
const maxServing = 256

// livenessInterval is how often a replica waiting for another's answer
// checks that the other still listens.
const livenessInterval = time.Second

// maxLivenessFailures is how many liveness checks in a row may fail (Redis
// does not answer) before a call is given up.
const maxLivenessFailures = 3

// Options configure a Store.
type Options struct {
	// URL is redis:// or rediss:// (config.Redis.URL).
	URL string
	// Password is the AUTH password; "" for none.
	Password string
	// CAFile, if set, holds the CAs of a rediss:// server.
	CAFile string
	// Sealer seals session ids and messages: the same keys on every
	// replica.
	Sealer *Sealer
	// SessionTTL is how long a session lives unused.
	SessionTTL time.Duration
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

// Handlers are what a store tells of what another replica did.
type Handlers struct {
	// Revoked: the session ended (DELETE, or made room for another).
	Revoked func(id string)
	// Level: the session's log level changed.
	Level func(id, level string)
	// Told: another replica passed on something for the session (Tell):
	// what, and its payload.
	Told func(id, what string, payload []byte)
	// Call runs another replica's request and returns its answer.
	Call func(ctx context.Context, payload []byte) []byte
	// Approved: the shared approvals changed (Approve); read them again
	// with Approvals.
	Approved func()
}

// Store is the Redis-backed state of a gateway replica.
type Store struct {
	rdb     *redis.Client
	sealer  *Sealer
	replica string
	ttl     time.Duration
	log     *slog.Logger

	handlers Handlers
	pubsub   *redis.PubSub
	serving  chan struct{} // slots of maxServing
	stop     context.CancelFunc
	wg       sync.WaitGroup

	mu sync.Mutex // guards the fields below
	// waiting holds this replica's calls to others, by correlation id.
	waiting map[string]chan []byte
	// served holds the cancels of the calls from others running here.
	served map[string]context.CancelFunc
	// acking holds this replica's revokes waiting for the others'
	// answers, by correlation id.
	acking map[string]*acks
	// seen holds the nonces of the messages taken, until they expire.
	seen   map[string]int64
	closed bool
}

// Open connects to Redis. It does not fail when Redis is down: the store
// retries as it is used, and a session it cannot read fails with
// ErrUnavailable until Redis is back.
func Open(opts Options) (*Store, error) {
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("state.redis.url: %w", err)
	}
	if opts.Password != "" {
		ro.Password = opts.Password
	}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("state.redis.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("state.redis.ca_file: %s holds no PEM certificate", opts.CAFile)
		}
		if ro.TLSConfig == nil {
			ro.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: hostOf(ro.Addr)}
		}
		ro.TLSConfig.RootCAs = pool
	}
	// A replica that cannot reach Redis answers with ErrUnavailable soon,
	// rather than holding a host's request.
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	// No command is retried: a PUBLISH that reached Redis but whose
	// answer was lost would run a call twice on another replica.
	ro.MaxRetries, ro.DialerRetries = -1, 1
	quietRedis.Do(func() { redis.SetLogger(discardLogger{}) })
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Store{
		rdb: redis.NewClient(ro), sealer: opts.Sealer, replica: hex.EncodeToString(id[:]), ttl: opts.SessionTTL,
		log: telemetry.Discard(opts.Logger), serving: make(chan struct{}, maxServing),
		waiting: map[string]chan []byte{}, served: map[string]context.CancelFunc{}, acking: map[string]*acks{},
	}
	return s, nil
}

// quietRedis silences go-redis's own logger (the standard log package,
// process-wide): the store reports what fails in the gateway's log, once,
// with what it means.
var quietRedis sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

func hostOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i]
		}
	}
	return addr
}

// Replica returns this replica's id: random, new at each start.
func (s *Store) Replica() string { return s.replica }

// Start listens for the other replicas' messages until Close. h must be
// set before anything else uses the store.
func (s *Store) Start(h Handlers) {
	s.handlers = h
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	// go-redis resubscribes by itself after a lost connection.
	s.pubsub = s.rdb.Subscribe(ctx, broadcast, inboxPrefix+s.replica)
	ch := s.pubsub.Channel(redis.WithChannelSize(1024))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for m := range ch {
			s.receive(ctx, []byte(m.Payload))
		}
	}()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		s.log.Error("cannot reach Redis (state.redis.url): legacy sessions new to this replica fail until it answers", telemetry.KeyErr, err)
	}
}

// Close stops listening, cancels the calls from others running here and
// closes the connections.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, cancel := range s.served {
		cancel()
	}
	s.mu.Unlock()
	if s.pubsub != nil {
		_ = s.pubsub.Close()
	}
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	return s.rdb.Close()
}

// unavailable wraps a Redis error.
func unavailable(err error) error { return fmt.Errorf("%w: %v", ErrUnavailable, err) }

// SessionSeal is what a legacy session id holds: what every request of
// the session needs.
type SessionSeal struct {
	Version   string `json:"v"`
	Principal string `json:"p"` // policy.Identity.ID of the identity that opened it
	Key       string `json:"k"` // policy.Identity.Key, for the audit log
	View      string `json:"t"` // its team view
}

// NewSessionID returns a new session id holding seal. Every id is new:
// the nonce is random.
func (s *Store) NewSessionID(seal SessionSeal) string {
	plain, _ := json.Marshal(seal) // plain strings always marshal
	return s.sealer.Seal(sessionIDPrefix, plain)
}

// OpenSessionID returns what a session id holds; false when it is not
// one of this gateway's.
func (s *Store) OpenSessionID(id string) (SessionSeal, bool) {
	var seal SessionSeal
	plain, ok := s.sealer.Open(sessionIDPrefix, id)
	if !ok || json.Unmarshal(plain, &seal) != nil {
		return SessionSeal{}, false
	}
	return seal, true
}

// sessionKey is the Redis key of a session's record: a digest of its id,
// so that what Redis holds is no session id.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return sessionPrefix + hex.EncodeToString(sum[:16])
}

// SessionRecord is what changes in a session, kept in Redis.
type SessionRecord struct {
	Capabilities json.RawMessage
	Level        string
}

// CreateSession records a new session, which then lives SessionTTL
// unused.
func (s *Store) CreateSession(ctx context.Context, id string, rec SessionRecord) error {
	key := sessionKey(id)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "caps", string(rec.Capabilities), "level", rec.Level)
		p.PExpire(ctx, key, s.ttl)
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Session reads a session's record: ErrNoSession when it expired or was
// deleted, ErrUnavailable when Redis does not answer.
func (s *Store) Session(ctx context.Context, id string) (SessionRecord, error) {
	m, err := s.rdb.HGetAll(ctx, sessionKey(id)).Result()
	if err != nil {
		return SessionRecord{}, unavailable(err)
	}
	caps, ok := m["caps"]
	if !ok {
		return SessionRecord{}, ErrNoSession
	}
	rec := SessionRecord{Level: m["level"]}
	if caps != "" {
		rec.Capabilities = json.RawMessage(caps)
	}
	return rec, nil
}

// TouchSession gives the session another SessionTTL, in the background:
// no request waits for it. gone is called when the session's record is
// no longer there (it ended, or expired, everywhere). The caller bounds
// how often it asks.
func (s *Store) TouchSession(id string, gone func()) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		switch ok, err := s.rdb.PExpire(ctx, sessionKey(id), s.ttl).Result(); {
		case err != nil:
			s.log.Warn("cannot extend a session in Redis", telemetry.KeyErr, err)
		case !ok && gone != nil:
			gone()
		}
	}()
}

// revokeWait bounds how long EndSession waits for the replicas to say
// they dropped the session: one that does not answer by then (its link to
// Redis is breaking) drops it when the message reaches it.
const revokeWait = 2 * time.Second

// EndSession deletes a session's record and tells every replica, which
// end their copies. It returns once every replica that got the message
// says it did (or after revokeWait), so that a session whose DELETE was
// answered is served nowhere.
func (s *Store) EndSession(ctx context.Context, id string) error {
	var corr [16]byte
	_, _ = rand.Read(corr[:])
	w := &acks{done: make(chan struct{}), need: -1}
	key := hex.EncodeToString(corr[:])
	s.mu.Lock()
	s.acking[key] = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.acking, key)
		s.mu.Unlock()
	}()
	msg := s.seal(message{Kind: kindRevoke, Session: id, From: s.replica, Corr: key})
	var told *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, sessionKey(id))
		told = p.Publish(ctx, broadcast, msg)
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	s.mu.Lock()
	w.need = int(told.Val())
	w.check()
	s.mu.Unlock()
	timer := time.NewTimer(revokeWait)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
		s.mu.Lock()
		got := w.got
		s.mu.Unlock()
		s.log.Warn("not every replica said it dropped an ended session; the others drop it when told",
			"told", w.need, "answered", got)
	case <-ctx.Done():
	}
	return nil
}

// acks counts the replicas that said they dropped an ended session.
// Store.mu guards it.
type acks struct {
	need int // replicas told; -1 until PUBLISH answered
	got  int
	done chan struct{}
}

// check closes done once every replica told answered.
func (a *acks) check() {
	if a.need >= 0 && a.got >= a.need {
		select {
		case <-a.done:
		default:
			close(a.done)
		}
	}
}

// SetLevel records a session's log level and tells every replica.
func (s *Store) SetLevel(ctx context.Context, id, level string) error {
	key := sessionKey(id)
	msg := s.seal(message{Kind: kindLevel, Session: id, Level: level})
	var exists *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, key)
		p.HSet(ctx, key, "level", level)
		p.PExpire(ctx, key, s.ttl)
		p.Publish(ctx, broadcast, msg)
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	if exists.Val() == 0 {
		// The session ended meanwhile: the write made a record without
		// capabilities, which Session reads as none.
		s.rdb.Del(ctx, key)
		return ErrNoSession
	}
	return nil
}

// Tell passes what a session's host sent to this replica, but belongs to
// a request running on another (an answer to the gateway's request, a
// cancellation), to every replica: the one running it takes it. Those
// without the session ignore it.
func (s *Store) Tell(ctx context.Context, id, what string, payload []byte) error {
	if err := s.rdb.Publish(ctx, broadcast, s.seal(message{Kind: kindTell, Session: id, Level: what, Payload: payload})).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// Message kinds between replicas.
const (
	kindTell   = "tell"
	kindRevoke = "revoke"
	kindLevel  = "level"
	kindCall   = "call"
	kindCancel = "cancel"
	kindReply  = "reply"
	// kindDropped answers a revoke: the replica dropped the session.
	kindDropped = "dropped"
)

// message is what replicas send one another, sealed.
type message struct {
	Kind    string `json:"k"`
	From    string `json:"f,omitempty"` // the sender's replica, for an answer
	Corr    string `json:"c,omitempty"` // a call's correlation id
	Session string `json:"s,omitempty"`
	Level   string `json:"l,omitempty"` // a level, or what a Tell passes on
	Payload []byte `json:"p,omitempty"`
	// Gone, in a reply, says the replica stopped before the call ended.
	Gone bool `json:"g,omitempty"`
	// To is the replica a message on its own channel is for ("" on the
	// broadcast channel), and Expires (Unix milliseconds) when it is no
	// longer taken: a message copied to another channel, or sent again
	// later, is dropped; within its life the same message (by its nonce)
	// is taken once.
	To      string `json:"t,omitempty"`
	Expires int64  `json:"e"`
}

// messageTTL is how long a message between replicas is taken after it
// was sent (allowing for clocks a little apart).
const messageTTL = 30 * time.Second

func (s *Store) seal(m message) []byte {
	m.Expires = time.Now().Add(messageTTL).UnixMilli()
	plain, _ := json.Marshal(m) // strings and bytes always marshal
	return s.sealer.SealBytes(messagePurpose, plain)
}

// fresh reports whether a sealed message is new: not seen before (by
// its nonce, the first bytes of what was sealed) and not expired. The
// nonces seen are kept until their messages expire.
func (s *Store) fresh(raw []byte, expires int64) bool {
	now := time.Now().UnixMilli()
	if now > expires || expires > now+2*messageTTL.Milliseconds() {
		return false
	}
	nonce := string(raw[:min(len(raw), 12)])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]int64{}
	}
	if _, dup := s.seen[nonce]; dup {
		return false
	}
	if len(s.seen) > 1024 {
		for k, e := range s.seen {
			if now > e {
				delete(s.seen, k)
			}
		}
	}
	s.seen[nonce] = expires
	return true
}

// receive handles one message: one that does not open under the key
// (not from a replica of this gateway) is dropped.
func (s *Store) receive(ctx context.Context, raw []byte) {
	plain, ok := s.sealer.OpenBytes(messagePurpose, raw)
	var m message
	if !ok || json.Unmarshal(plain, &m) != nil {
		s.log.Warn("dropped a message on the gateway's Redis channels that was not sealed with state.key")
		return
	}
	if (m.To != "" && m.To != s.replica) || !s.fresh(raw, m.Expires) {
		s.log.Warn("dropped a message between replicas sent again, late, or to another replica")
		return
	}
	switch m.Kind {
	case kindRevoke:
		if s.handlers.Revoked != nil {
			s.handlers.Revoked(m.Session)
		}
		s.dropped(ctx, m)
	case kindDropped:
		s.mu.Lock()
		if w := s.acking[m.Corr]; w != nil {
			w.got++
			w.check()
		}
		s.mu.Unlock()
	case kindLevel:
		if s.handlers.Level != nil {
			s.handlers.Level(m.Session, m.Level)
		}
	case kindTell:
		if s.handlers.Told != nil {
			s.handlers.Told(m.Session, m.Level, m.Payload)
		}
	case kindReply:
		s.mu.Lock()
		ch := s.waiting[m.Corr]
		delete(s.waiting, m.Corr)
		s.mu.Unlock()
		switch {
		case ch == nil: // the caller gave up
		case m.Gone:
			close(ch)
		default:
			ch <- m.Payload
		}
	case kindCancel:
		s.mu.Lock()
		cancel := s.served[m.Corr]
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	case kindCall:
		s.serve(ctx, m)
	case kindApproved:
		if s.handlers.Approved != nil {
			s.handlers.Approved()
		}
	}
}

// dropped tells the replica that revoked a session that this one dropped
// it.
func (s *Store) dropped(ctx context.Context, m message) {
	if m.From == "" || m.Corr == "" {
		return
	}
	reply := s.seal(message{Kind: kindDropped, To: m.From, Corr: m.Corr})
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.rdb.Publish(pctx, inboxPrefix+m.From, reply).Err(); err != nil {
		s.log.Warn("cannot tell another replica this one dropped a session", "replica", m.From, telemetry.KeyErr, err)
	}
}

// serve runs another replica's call in its own goroutine and sends the
// answer back.
func (s *Store) serve(ctx context.Context, m message) {
	if s.handlers.Call == nil || m.From == "" || m.Corr == "" {
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return
	}
	s.served[m.Corr] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.served, m.Corr)
			s.mu.Unlock()
			cancel()
		}()
		select {
		case s.serving <- struct{}{}:
			defer func() { <-s.serving }()
		case <-cctx.Done():
			return
		}
		answer := s.handlers.Call(cctx, m.Payload)
		reply := message{Kind: kindReply, Corr: m.Corr, Payload: answer}
		if cctx.Err() != nil {
			// Cancelled: by the caller, who no longer waits, or by Close,
			// which the caller must hear of at once.
			reply = message{Kind: kindReply, To: m.From, Corr: m.Corr, Gone: true}
		}
		pctx, pcancel := context.WithTimeout(context.WithoutCancel(cctx), 5*time.Second)
		defer pcancel()
		if err := s.rdb.Publish(pctx, inboxPrefix+m.From, s.seal(reply)).Err(); err != nil {
			s.log.Warn("cannot answer another replica's call", "replica", m.From, telemetry.KeyErr, err)
		}
	}()
}

// Call asks replica to run payload (Handlers.Call there) and returns its
// answer: ErrReplicaGone when that replica is not listening,
// ErrInterrupted when it stops listening before it answers;
// ErrUnavailable when Redis does not answer; ctx's error when ctx ends first (the other replica is told to
// cancel).
func (s *Store) Call(ctx context.Context, replica string, payload []byte) ([]byte, error) {
	var corr [16]byte
	_, _ = rand.Read(corr[:])
	id := hex.EncodeToString(corr[:])
	ch := make(chan []byte, 1)
	s.mu.Lock()
	s.waiting[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
	}()
	inbox := inboxPrefix + replica
	n, err := s.rdb.Publish(ctx, inbox, s.seal(message{Kind: kindCall, To: replica, From: s.replica, Corr: id, Payload: payload})).Result()
	switch {
	case err != nil:
		return nil, unavailable(err)
	case n == 0:
		return nil, ErrReplicaGone
	}
	tick := time.NewTicker(livenessInterval)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case answer, ok := <-ch:
			if !ok {
				return nil, ErrInterrupted
			}
			return answer, nil
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			s.rdb.Publish(cctx, inbox, s.seal(message{Kind: kindCancel, To: replica, From: s.replica, Corr: id}))
			cancel()
			return nil, ctx.Err()
		case <-tick.C:
			subs, err := s.rdb.PubSubNumSub(ctx, inbox).Result()
			switch {
			case err != nil:
				// Redis is down: the answer cannot come back either.
				if failures++; failures == maxLivenessFailures {
					return nil, unavailable(err)
				}
			case subs[inbox] == 0:
				return nil, ErrInterrupted
			default:
				failures = 0
			}
		}
	}
}

// ownerPrefix + a digest names a claim: which replica holds something
// that cannot move (a per-client upstream session).
const ownerPrefix = keyPrefix + "o:"

// claimScript makes ARGV[1] the owner of KEYS[1] for ARGV[2] ms unless
// another replica owns it, renewing the claim of its owner, and returns
// the owner.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v`)

// disownScript removes KEYS[1]'s claim if ARGV[1] holds it.
var disownScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

func ownerKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return ownerPrefix + hex.EncodeToString(sum[:16])
}

// Claim makes this replica the owner of name for ttl, unless another
// replica owns it, and returns the owner's replica id.
func (s *Store) Claim(ctx context.Context, name string, ttl time.Duration) (string, error) {
	owner, err := claimScript.Run(ctx, s.rdb, []string{ownerKey(name)}, s.replica, ttl.Milliseconds()).Text()
	if err != nil {
		return "", unavailable(err)
	}
	return owner, nil
}

// Disown ends replica's claim of name (it is gone), so that the next
// Claim takes it.
func (s *Store) Disown(ctx context.Context, name, replica string) error {
	if err := disownScript.Run(ctx, s.rdb, []string{ownerKey(name)}, replica).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}
