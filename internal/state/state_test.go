package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/state"
	"github.com/mcp-gateway/mcp-gateway/internal/state/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func sealer(t *testing.T, keys ...[]byte) *state.Sealer {
	t.Helper()
	s, err := state.NewSealer(keys)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealer(t *testing.T) {
	t.Parallel()
	a, b := sealer(t, key(1)), sealer(t, key(2))
	sealed := a.Seal("p1.", []byte("hello"))
	if got, ok := a.Open("p1.", sealed); !ok || string(got) != "hello" {
		t.Fatalf("open = %q, %v", got, ok)
	}
	if _, ok := b.Open("p1.", sealed); ok {
		t.Error("another key opened it")
	}
	// Bound to its purpose: the same bytes under another prefix fail.
	if _, ok := a.Open("p2.", "p2."+sealed[len("p1."):]); ok {
		t.Error("opened for another purpose")
	}
	// Rotation: the new key seals, the previous one still opens.
	rotated := sealer(t, key(2), key(1))
	if got, ok := rotated.Open("p1.", sealed); !ok || string(got) != "hello" {
		t.Error("the previous key did not open")
	}
	if _, ok := a.Open("p1.", rotated.Seal("p1.", []byte("x"))); ok {
		t.Error("a value sealed with the new key opened under the old one alone")
	}
	flipped := []byte(sealed)
	flipped[len(flipped)-3] ^= 1
	if _, ok := a.Open("p1.", string(flipped)); ok {
		t.Error("a tampered value opened")
	}
	if _, err := state.NewSealer([][]byte{key(1)[:16]}); err == nil {
		t.Error("a 16-byte key accepted")
	}
}

// pair starts two stores (two replicas) on one Redis.
func pair(t *testing.T, srv *redistest.Server, ha, hb state.Handlers) (*state.Store, *state.Store) {
	t.Helper()
	open := func(h state.Handlers) *state.Store {
		s, err := state.Open(state.Options{URL: srv.URL, Sealer: sealer(t, key(7)), SessionTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(h)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(ha), open(hb)
	awaitListening(t, srv, a, b)
	return a, b
}

// awaitListening waits until each store's subscription is in place.
func awaitListening(t *testing.T, srv *redistest.Server, stores ...*state.Store) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range stores {
		ch := "mcpgw:r:" + s.Replica()
		for {
			n, err := rdb.PubSubNumSub(context.Background(), ch).Result()
			if err == nil && n[ch] == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %s never subscribed", s.Replica())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	revoked := make(chan string, 4)
	levels := make(chan [2]string, 4)
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{
		Revoked: func(id string) { revoked <- id },
		Level:   func(id, level string) { levels <- [2]string{id, level} },
	})
	ctx := context.Background()
	seal := state.SessionSeal{Version: "2025-11-25", Principal: "key:abc", Key: "k1", View: "data"}
	id := a.NewSessionID(seal)
	if id2 := a.NewSessionID(seal); id2 == id {
		t.Fatal("two sessions got one id")
	}
	caps := json.RawMessage(`{"elicitation":{}}`)
	if err := a.CreateSession(ctx, id, state.SessionRecord{Capabilities: caps}); err != nil {
		t.Fatal(err)
	}
	// The other replica opens the id and reads the record.
	got, ok := b.OpenSessionID(id)
	if !ok || got != seal {
		t.Fatalf("OpenSessionID = %+v, %v", got, ok)
	}
	rec, err := b.Session(ctx, id)
	if err != nil || string(rec.Capabilities) != string(caps) {
		t.Fatalf("Session = %+v, %v", rec, err)
	}
	if _, ok := b.OpenSessionID("0123456789abcdef0123456789abcdef"); ok {
		t.Error("a made-up id opened")
	}
	if err := a.SetLevel(ctx, id, "warning"); err != nil {
		t.Fatal(err)
	}
	if l := <-levels; l != [2]string{id, "warning"} {
		t.Errorf("level event %v", l)
	}
	if rec, _ := b.Session(ctx, id); rec.Level != "warning" {
		t.Errorf("level in Redis %q", rec.Level)
	}
	if err := a.EndSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	// EndSession returns once the other replica dropped the session.
	select {
	case r := <-revoked:
		if r != id {
			t.Errorf("revoked %q", r)
		}
	default:
		t.Error("EndSession returned before the other replica dropped the session")
	}
	if _, err := b.Session(ctx, id); !errors.Is(err, state.ErrNoSession) {
		t.Errorf("after EndSession: %v, want ErrNoSession", err)
	}
	if err := a.SetLevel(ctx, id, "info"); !errors.Is(err, state.ErrNoSession) {
		t.Errorf("SetLevel on an ended session: %v", err)
	}
	if _, err := b.Session(ctx, id); !errors.Is(err, state.ErrNoSession) {
		t.Errorf("SetLevel brought an ended session back: %v", err)
	}
}

// TestEndSessionWithASilentListener: a subscriber that never answers (not
// a replica, or one whose link is breaking) does not hold EndSession past
// its bound.
func TestEndSessionWithASilentListener(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := pair(t, srv, state.Handlers{}, state.Handlers{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	sub := rdb.Subscribe(ctx, "mcpgw:all")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	id := a.NewSessionID(state.SessionSeal{Version: "2025-11-25", Principal: "key:abc"})
	if err := a.CreateSession(ctx, id, state.SessionRecord{Capabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := a.EndSession(ctx, id); err != nil {
		t.Fatalf("EndSession with a silent listener: %v", err)
	}
	if _, err := a.Session(ctx, id); !errors.Is(err, state.ErrNoSession) {
		t.Errorf("after EndSession: %v, want ErrNoSession", err)
	}
}

func TestCallBetweenReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	started := make(chan struct{})
	cancelled := make(chan struct{})
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{Call: func(ctx context.Context, p []byte) []byte {
		if string(p) == "block" {
			close(started)
			<-ctx.Done()
			close(cancelled)
			return nil
		}
		return append([]byte("echo:"), p...)
	}})
	ctx := context.Background()
	got, err := a.Call(ctx, b.Replica(), []byte("hi"))
	if err != nil || string(got) != "echo:hi" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	// A caller that gives up cancels the call on the other replica.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := a.Call(cctx, b.Replica(), []byte("block")); done <- err }()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Call: %v", err)
	}
	<-cancelled
	if _, err := a.Call(ctx, "0000000000000000", []byte("x")); !errors.Is(err, state.ErrReplicaGone) {
		t.Errorf("Call to no replica: %v, want ErrReplicaGone", err)
	}
}

// TestCallToAReplicaThatDies: a replica that stops listening while a call
// waits on it is found gone, not waited for.
func TestCallToAReplicaThatDies(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	started := make(chan struct{})
	var b *state.Store
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{Call: func(ctx context.Context, p []byte) []byte {
		close(started)
		<-ctx.Done()
		return nil
	}})
	done := make(chan error, 1)
	go func() { _, err := a.Call(context.Background(), b.Replica(), []byte("x")); done <- err }()
	<-started
	_ = b.Close()
	if err := <-done; !errors.Is(err, state.ErrInterrupted) {
		t.Errorf("Call to a replica that closed: %v, want ErrInterrupted", err)
	}
}

// TestForgedMessages: whoever reaches Redis without the key cannot make
// a replica run a call or revoke a session.
func TestForgedMessages(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	calls := make(chan []byte, 1)
	revoked := make(chan string, 1)
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{
		Call:    func(_ context.Context, p []byte) []byte { calls <- p; return p },
		Revoked: func(id string) { revoked <- id },
	})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	other := sealer(t, key(9))
	for _, raw := range [][]byte{
		[]byte(`{"k":"call","f":"x","c":"y","p":"aGk="}`),
		[]byte(`{"k":"revoke","s":"id"}`),
		other.SealBytes("mcpgw-message", []byte(`{"k":"revoke","s":"id"}`)),
	} {
		rdb.Publish(ctx, "mcpgw:r:"+b.Replica(), raw)
		rdb.Publish(ctx, "mcpgw:all", raw)
	}
	// A genuine call after the forgeries is the first thing b runs.
	if got, err := a.Call(ctx, b.Replica(), []byte("real")); err != nil || string(got) != "real" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	if p := <-calls; string(p) != "real" {
		t.Errorf("b ran a forged call: %q", p)
	}
	select {
	case id := <-revoked:
		t.Errorf("a forged revoke of %q was taken", id)
	default:
	}
}

// TestRedisDown: while Redis is down, what needs it fails at once with
// ErrUnavailable; once it is back, the store works again without a
// restart.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, _ := pair(t, srv, state.Handlers{}, state.Handlers{})
	ctx := context.Background()
	id := a.NewSessionID(state.SessionSeal{Version: "2025-11-25"})
	srv.Stop()
	if err := a.CreateSession(ctx, id, state.SessionRecord{Capabilities: json.RawMessage(`{}`)}); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("CreateSession with Redis down: %v", err)
	}
	if _, err := a.Session(ctx, id); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("Session with Redis down: %v", err)
	}
	srv.Restart(t)
	if err := a.CreateSession(ctx, id, state.SessionRecord{Capabilities: json.RawMessage(`{}`)}); err != nil {
		t.Errorf("CreateSession after Redis came back: %v", err)
	}
	if _, err := a.Session(ctx, id); err != nil {
		t.Errorf("Session after Redis came back: %v", err)
	}
}

// TestClaims: the first replica to claim a name owns it until its claim
// lapses or it is disowned; the owner renews it.
func TestClaims(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{})
	ctx := context.Background()
	if owner, err := a.Claim(ctx, "up\x00host", time.Minute); err != nil || owner != a.Replica() {
		t.Fatalf("a's claim: %q, %v", owner, err)
	}
	if owner, _ := b.Claim(ctx, "up\x00host", time.Minute); owner != a.Replica() {
		t.Errorf("b's claim of a's: owner %q, want a", owner)
	}
	if err := b.Disown(ctx, "up\x00host", b.Replica()); err != nil {
		t.Fatal(err)
	}
	if owner, _ := b.Claim(ctx, "up\x00host", time.Minute); owner != a.Replica() {
		t.Errorf("disowned by a replica that does not own it: owner %q", owner)
	}
	if err := b.Disown(ctx, "up\x00host", a.Replica()); err != nil {
		t.Fatal(err)
	}
	if owner, _ := b.Claim(ctx, "up\x00host", time.Minute); owner != b.Replica() {
		t.Errorf("after a was disowned: owner %q, want b", owner)
	}
	if owner, _ := a.Claim(ctx, "up\x00host", 20*time.Millisecond); owner != b.Replica() {
		t.Errorf("another name's claim leaked: %q", owner)
	}
}

// TestRedisTLSAndPassword: rediss:// with a private CA (ca_file) and a
// password; the wrong password, or a server the CA did not sign, is
// ErrUnavailable, never a session.
func TestRedisTLSAndPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert := mcptest.NewCert(t, 1, false)
	certFile, keyFile, caFile := filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key"), filepath.Join(dir, "ca.pem")
	cert.Write(t, certFile, keyFile, time.Now())
	mcptest.WriteFileAt(t, caFile, cert.CertPEM, time.Now())
	srv := redistest.StartTLS(t, certFile, keyFile, mcptest.Pool(cert), "--requirepass", "s3cret")
	open := func(password, ca string) *state.Store {
		s, err := state.Open(state.Options{URL: srv.URL, Password: password, CAFile: ca, Sealer: sealer(t, key(7)), SessionTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	ctx := context.Background()
	good := open("s3cret", caFile)
	id := good.NewSessionID(state.SessionSeal{Version: "2025-11-25"})
	if err := good.CreateSession(ctx, id, state.SessionRecord{Capabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("over TLS with the password: %v", err)
	}
	if _, err := open("wrong", caFile).Session(ctx, id); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("the wrong password: %v, want ErrUnavailable", err)
	}
	other := mcptest.NewCert(t, 2, false)
	otherCA := filepath.Join(dir, "other-ca.pem")
	mcptest.WriteFileAt(t, otherCA, other.CertPEM, time.Now())
	if _, err := open("s3cret", otherCA).Session(ctx, id); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("a server another CA signed: %v, want ErrUnavailable", err)
	}
	if _, err := state.Open(state.Options{URL: srv.URL, CAFile: filepath.Join(dir, "missing.pem"), Sealer: sealer(t, key(7))}); err == nil {
		t.Error("a missing ca_file was accepted")
	}
}

// TestReplayedMessages: a genuine message copied from Redis and sent
// again, to the same replica or to another, is not acted on.
func TestReplayedMessages(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	calls := make(chan []byte, 8)
	handler := state.Handlers{Call: func(_ context.Context, p []byte) []byte { calls <- p; return p }}
	a, b := pair(t, srv, state.Handlers{}, handler)
	c, _ := pair(t, srv, handler, state.Handlers{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	tap := rdb.Subscribe(ctx, "mcpgw:r:"+b.Replica())
	defer tap.Close()
	if _, err := tap.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	if got, err := a.Call(ctx, b.Replica(), []byte("once")); err != nil || string(got) != "once" {
		t.Fatalf("Call = %q, %v", got, err)
	}
	<-calls
	captured, err := tap.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Publish(ctx, "mcpgw:r:"+b.Replica(), captured.Payload) // again, to b
	rdb.Publish(ctx, "mcpgw:r:"+c.Replica(), captured.Payload) // to another replica
	// Each replica takes its channel's messages in order: a genuine call
	// after the replay is the next thing each runs.
	for _, to := range []*state.Store{b, c} {
		if got, err := a.Call(ctx, to.Replica(), []byte("next")); err != nil || string(got) != "next" {
			t.Fatalf("Call = %q, %v", got, err)
		}
		if p := <-calls; string(p) != "next" {
			t.Errorf("a replayed call ran: %q", p)
		}
	}
}

// TestCallWhileRedisStops: a call waiting on another replica when Redis
// stops ends with an error, instead of waiting for an answer that cannot
// come.
func TestCallWhileRedisStops(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{Call: func(ctx context.Context, p []byte) []byte {
		close(started)
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil
	}})
	done := make(chan error, 1)
	go func() { _, err := a.Call(context.Background(), b.Replica(), []byte("x")); done <- err }()
	<-started
	srv.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, state.ErrUnavailable) && !errors.Is(err, state.ErrInterrupted) {
			t.Errorf("Call when Redis stopped: %v, want ErrUnavailable or ErrInterrupted", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Call still waits a minute after Redis stopped")
	}
}

// TestSharedApprovals: an approval one replica records reaches the
// others (Approved, then Approvals); a value written to the approvals
// hash without the key, or a genuine one moved to another field, is
// left out; with Redis down Approve fails with ErrUnavailable.
func TestSharedApprovals(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	told := make(chan struct{}, 4)
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{
		Approved: func() { told <- struct{}{} },
		Call:     func(_ context.Context, p []byte) []byte { return p },
	})
	ctx := context.Background()
	if err := a.Approve(ctx, map[string][]byte{"tool/up/echo": []byte(`{"sha256":"aa"}`)}); err != nil {
		t.Fatal(err)
	}
	<-told
	got, err := b.Approvals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["tool/up/echo"]) != `{"sha256":"aa"}` {
		t.Fatalf("Approvals = %q", got)
	}

	// Forgeries: plain text, sealed under another key, a genuine value
	// moved to another field; and a forged "approved" message.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	genuine, err := rdb.HGet(ctx, "mcpgw:approvals", "tool/up/echo").Result()
	if err != nil {
		t.Fatal(err)
	}
	other := sealer(t, key(9))
	rdb.HSet(ctx, "mcpgw:approvals",
		"tool/up/plain", `{"sha256":"bb"}`,
		"tool/up/otherkey", other.SealBytes("mcpgw-approval:tool/up/otherkey", []byte(`{"sha256":"cc"}`)),
		"tool/up/moved", genuine)
	rdb.Publish(ctx, "mcpgw:all", `{"k":"approved"}`)
	got, err = b.Approvals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["tool/up/echo"] == nil {
		t.Errorf("Approvals took a forged entry: %q", got)
	}
	// The forged message was dropped: b takes its messages in order, so
	// once it answered a call sent after it, it has handled it.
	if _, err := a.Call(ctx, b.Replica(), []byte("barrier")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-told:
		t.Error("a forged approved message was taken")
	default:
	}

	srv.Stop()
	if err := a.Approve(ctx, map[string][]byte{"x": []byte(`{}`)}); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("Approve with Redis down: %v", err)
	}
	if _, err := a.Approvals(ctx); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("Approvals with Redis down: %v", err)
	}
}

// Console sessions: what one replica records another reads, each read
// gives it more time, an end ends it for all, and a value not sealed
// with the key for its digest (forged in Redis, or moved from another
// session's key) opens nothing.
func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, b := pair(t, srv, state.Handlers{}, state.Handlers{})
	ctx := context.Background()
	if err := a.PutConsoleSession(ctx, "d1", []byte(`{"t":"tok"}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := b.ConsoleSession(ctx, "d1", time.Hour)
	if err != nil || string(got) != `{"t":"tok"}` {
		t.Fatalf("the other replica read %q, %v", got, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if ttl := rdb.TTL(ctx, "mcpgw:console:d1").Val(); ttl < 59*time.Minute {
		t.Errorf("after a read with an hour, the TTL is %v", ttl)
	}
	if raw := rdb.Get(ctx, "mcpgw:console:d1").Val(); strings.Contains(raw, "tok") {
		t.Error("the session's credential is readable in Redis")
	}
	// Moved to another digest: does not open there.
	rdb.Set(ctx, "mcpgw:console:d2", rdb.Get(ctx, "mcpgw:console:d1").Val(), time.Minute)
	if _, err := b.ConsoleSession(ctx, "d2", time.Minute); !errors.Is(err, state.ErrNoConsoleSession) {
		t.Errorf("a session moved to another key: %v, want ErrNoConsoleSession", err)
	}
	rdb.Set(ctx, "mcpgw:console:d3", "forged", time.Minute)
	if _, err := b.ConsoleSession(ctx, "d3", time.Minute); !errors.Is(err, state.ErrNoConsoleSession) {
		t.Errorf("a forged session: %v, want ErrNoConsoleSession", err)
	}
	if err := b.EndConsoleSession(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ConsoleSession(ctx, "d1", time.Minute); !errors.Is(err, state.ErrNoConsoleSession) {
		t.Errorf("an ended session: %v, want ErrNoConsoleSession", err)
	}
}
