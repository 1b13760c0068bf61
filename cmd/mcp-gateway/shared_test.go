package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/state/redistest"
)

// sharedReplicas starts n gateways that share sessions through one real
// Redis, all in front of one legacy (2025-11-25) upstream, and a
// round-robin balancer in front of them with no affinity: each request
// goes to the next replica. It returns the balancer's URL and each
// replica's.
func sharedReplicas(t *testing.T, n int) (balancer string, replicas []string) {
	t.Helper()
	balancer, replicas, _ = sharedReplicasWithRedis(t, n, nil)
	return balancer, replicas
}

// sharedReplicasWithRedis is sharedReplicas that also returns the Redis
// server's address.
// edit, if set, changes replica i's config.
func sharedReplicasWithRedis(t *testing.T, n int, edit func(i int, cfg *config.Config)) (balancer string, replicas []string, redisAddr string) {
	t.Helper()
	redis := redistest.Start(t)
	balancer, replicas = replicasOn(t, redis, n, edit)
	return balancer, replicas, redis.Addr
}

// replicasOn is sharedReplicasWithRedis on a Redis the test started.
func replicasOn(t *testing.T, redis *redistest.Server, n int, edit func(i int, cfg *config.Config)) (balancer string, replicas []string) {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	up := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	var targets []*url.URL
	for i := range n {
		cfg := config.Default()
		cfg.Upstreams = []config.Upstream{relaying(httpUpstream("up", up.URL))}
		cfg.State = config.State{Store: config.StoreRedis, Redis: config.Redis{URL: redis.URL}, Key: config.Secret{File: keyFile}}
		if edit != nil {
			edit(i, cfg)
		}
		u, _ := startGateway(t, cfg)
		replicas = append(replicas, u)
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	var next atomic.Uint64
	lb := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[next.Add(1)%uint64(len(targets))])
			pr.Out.URL.Path = pr.In.URL.Path
			pr.Out.Host = pr.Out.URL.Host
		},
		FlushInterval: -1, // SSE streams pass at once
	}
	ts := httptest.NewServer(buffered(lb))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", replicas
}

// TestSharedSessionsAnyReplica: behind a balancer without affinity,
// replicas that share state serve one legacy session on each request,
// relay an upstream's elicitation whose answer comes back on another
// replica, complete a modern host's retries of a call parked on another
// replica, and a DELETE on one ends the session on all.
func TestSharedSessionsAnyReplica(t *testing.T) {
	lb, replicas := sharedReplicas(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	legacy := newLiveHost(t, lb, eras[0], "Ada")
	for i := range 6 { // three requests on each replica
		text, isErr := toolResult(ctx, t, legacy.cs, "up__echo", map[string]any{"text": "hi"})
		if isErr || text != "hi" {
			t.Fatalf("legacy call %d through the balancer: %q (isError %v)", i, text, isErr)
		}
	}
	for i := range 4 {
		// The upstream's elicitation reaches the host on the request's
		// stream; its answer is POSTed, to the other replica half the
		// time.
		text, isErr := toolResult(ctx, t, legacy.cs, "up__elicit", map[string]any{"message": "name?"})
		if isErr || !strings.Contains(text, `"name":"Ada"`) {
			t.Fatalf("legacy elicitation %d: %q (isError %v)", i, text, isErr)
		}
	}

	modern := newLiveHost(t, lb, eras[1], "Grace")
	for i := range 4 {
		// Each call is parked on the replica it reached; its retry
		// reaches the other half the time.
		text, isErr := toolResult(ctx, t, modern.cs, "up__elicit", map[string]any{"message": "name?"})
		if isErr || !strings.Contains(text, `"name":"Grace"`) {
			t.Fatalf("modern elicitation %d: %q (isError %v)", i, text, isErr)
		}
	}

	sid := legacy.cs.ID()
	if err := legacy.cs.Close(); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	for i, r := range replicas {
		code, _, msg := postRaw(ctx, t, r, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if code != http.StatusNotFound {
			t.Errorf("replica %d after the DELETE: %d %+v, want 404", i, code, msg)
		}
	}
}

// TestSharedSessionIDIsSealed: a session id made up, or sealed under
// another key, is not a session on any replica.
func TestSharedSessionIDIsSealed(t *testing.T) {
	_, replicas := sharedReplicas(t, 2)
	ctx := context.Background()
	for _, sid := range []string{"0123456789abcdef0123456789abcdef", "mcpgw1.AAAA", "mcpgw1." + strings.Repeat("A", 120)} {
		code, _, _ := postRaw(ctx, t, replicas[1], map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if code != http.StatusNotFound {
			t.Errorf("session id %q: %d, want 404", sid, code)
		}
	}
	// A genuine id from one replica works on the other.
	cs := connect(t, replicas[0], eras[0])
	code, _, msg := postRaw(ctx, t, replicas[1], map[string]string{"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": eras[0]},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if code != http.StatusOK || msg == nil || msg.Error != nil {
		t.Errorf("replica 1 with replica 0's session: %d %+v", code, msg)
	}
}

// redisCommands returns how many times Redis ran each command so far.
func redisCommands(t *testing.T, addr string) map[string]int {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(info, "\r\n") {
		// cmdstat_hgetall:calls=3,usec=...
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		counts[name], _ = strconv.Atoi(n)
	}
	return counts
}

// TestSharedSessionCallsTouchNoRedis: once a replica holds a session, a
// legacy host's calls on it make no Redis round trip on their path: the
// first request on a new replica reads the session once, and the idle
// timeout is renewed in the background at most once per eighth of it.
// A modern host's calls touch Redis not at all.
func TestSharedSessionCallsTouchNoRedis(t *testing.T) {
	_, replicas, redisAddr := sharedReplicasWithRedis(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := connect(t, replicas[0], eras[0])
	call := func(r string, id int) {
		t.Helper()
		code, _, msg := postRaw(ctx, t, r, map[string]string{"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"x"}}}`)
		if code != http.StatusOK || msg == nil || msg.Error != nil {
			t.Fatalf("call on %s: %d %+v", r, code, msg)
		}
	}
	call(replicas[1], 1) // replica 1 adopts the session: one read
	before := redisCommands(t, redisAddr)
	for i := range 50 {
		call(replicas[i%2], 10+i)
	}
	modern := connect(t, replicas[1], eras[1])
	for range 20 {
		if _, isErr := toolResult(ctx, t, modern, "up__echo", map[string]any{"text": "x"}); isErr {
			t.Fatal("modern call failed")
		}
	}
	after := redisCommands(t, redisAddr)
	for cmd, n := range after {
		// The test's own INFO (and its connection's HELLO) are the only
		// commands expected; PEXPIRE may renew the
		// session in the background once per replica.
		if d := n - before[cmd]; d > 0 && cmd != "info" && cmd != "hello" && !(cmd == "pexpire" && d <= 2) {
			t.Errorf("Redis ran %s %d times for 50 legacy calls on held sessions and 20 modern calls, want none", cmd, d)
		}
	}
	t.Logf("Redis commands for the 70 calls: %v (before: %v)", diff(after, before), before)
}

func diff(after, before map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// TestSharedSessionsOutliveAFullTable: a replica whose session table is
// full drops a session it adopted only from its table; the session goes
// on, there and everywhere.
func TestSharedSessionsOutliveAFullTable(t *testing.T) {
	_, replicas, _ := sharedReplicasWithRedis(t, 2, func(i int, c *config.Config) {
		if i == 1 {
			c.Limits.MaxSessions = 1
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	one, two := connect(t, replicas[0], eras[0]), connect(t, replicas[0], eras[0])
	for i := range 6 {
		sid := []string{one.ID(), two.ID()}[i%2]
		code, _, msg := postRaw(ctx, t, replicas[1], map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"tools/list"}`)
		if code != http.StatusOK || msg == nil || msg.Error != nil {
			t.Fatalf("request %d on replica 1, whose table holds one session: %d %+v", i, code, msg)
		}
	}
}

// TestSharedRedisDown: while Redis is down, modern hosts and the legacy
// sessions a replica holds go on; what needs Redis fails at once with a
// clear 503; once Redis is back, new sessions open again, without a
// restart.
func TestSharedRedisDown(t *testing.T) {
	redis := redistest.Start(t)
	_, replicas := replicasOn(t, redis, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := connect(t, replicas[0], eras[0])
	modern := connect(t, replicas[1], eras[1])
	redis.Stop()
	if text, isErr := toolResult(ctx, t, held, "up__echo", map[string]any{"text": "held"}); isErr || text != "held" {
		t.Errorf("a held legacy session with Redis down: %q", text)
	}
	if text, isErr := toolResult(ctx, t, modern, "up__echo", map[string]any{"text": "modern"}); isErr || text != "modern" {
		t.Errorf("a modern host with Redis down: %q", text)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	code, hdr, msg := postRaw(ctx, t, replicas[1], nil, initialize)
	if code != http.StatusServiceUnavailable || msg == nil || msg.Error == nil || !strings.Contains(msg.Error.Message, "Redis") || hdr.Get("Retry-After") == "" {
		t.Errorf("initialize with Redis down: %d %+v, want 503 naming Redis, with Retry-After", code, msg)
	}
	code, _, msg = postRaw(ctx, t, replicas[1], map[string]string{"Mcp-Session-Id": held.ID(), "MCP-Protocol-Version": eras[0]},
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if code != http.StatusServiceUnavailable {
		t.Errorf("a session replica 1 has not seen, with Redis down: %d %+v, want 503", code, msg)
	}
	redis.Restart(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, hdr, _ = postRaw(ctx, t, replicas[1], nil, initialize)
		if code == http.StatusOK && hdr.Get("Mcp-Session-Id") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("initialize after Redis came back: %d", code)
		}
		time.Sleep(50 * time.Millisecond) // polling a real socket, with a deadline
	}
}

// TestSharedSessionOfAnotherIdentity: another key presenting a session's
// id on a replica that has not seen the session is refused (403), and
// that replica neither reads the session from Redis nor adopts it; the
// session's own key is then served there as usual.
func TestSharedSessionOfAnotherIdentity(t *testing.T) {
	const alice, bob = "alice-key-0123456789abcdef", "bob-key-0123456789abcdefgh"
	_, replicas, redisAddr := sharedReplicasWithRedis(t, 2, func(_ int, c *config.Config) {
		c.Auth.Mode = config.AuthAPIKey
		c.Teams = []config.Team{{Name: "staff", APIKeys: []string{alice, bob}, Allow: []string{"*"}}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	code, hdr, _ := postRaw(ctx, t, replicas[0], map[string]string{"Authorization": "Bearer " + alice}, initialize)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d", code)
	}
	list := func(key string) (int, *jsonrpc.Message) {
		code, _, msg := postRaw(ctx, t, replicas[1], map[string]string{"Authorization": "Bearer " + key, "Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		return code, msg
	}
	before := redisCommands(t, redisAddr)
	if code, msg := list(bob); code != http.StatusForbidden {
		t.Errorf("bob with alice's session on replica 1: %d %+v, want 403", code, msg)
	}
	if d := diff(redisCommands(t, redisAddr), before); d["hgetall"] != 0 {
		t.Errorf("bob's request made replica 1 read alice's session (%v)", d)
	}
	if code, msg := list(alice); code != http.StatusOK || msg == nil || msg.Error != nil {
		t.Errorf("alice on replica 1 after bob's try: %d %+v", code, msg)
	}
}

// TestSharedTellFlood: answers and cancellations a host sends for no
// request of its replica are passed on to the others, but a flood of them
// is bounded per session (a burst of 50, then 20/s), not a publish each.
func TestSharedTellFlood(t *testing.T) {
	_, replicas, redisAddr := sharedReplicasWithRedis(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := connect(t, replicas[0], eras[0])
	before := redisCommands(t, redisAddr)
	start := time.Now()
	const flood = 300
	for i := range flood {
		body := `{"jsonrpc":"2.0","id":"gw-made-up-` + strconv.Itoa(i) + `","result":{}}`
		if i%2 == 1 {
			body = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + strconv.Itoa(i) + `}}`
		}
		resp := postResponse(ctx, t, replicas[0], map[string]string{"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": eras[0]}, body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("message %d: %d, want 202", i, resp.StatusCode)
		}
	}
	// The bound follows from the limiter (burst 50, 20/s over the time
	// the flood took), whatever the machine's speed.
	most := 50 + int(20*time.Since(start).Seconds()) + 1
	published := diff(redisCommands(t, redisAddr), before)["publish"]
	if published == 0 || published > most {
		t.Errorf("%d messages for no request here were passed on in %d publishes, want some and at most %d (the session's rate)", flood, published, most)
	}
	t.Logf("%d messages, %d publishes", flood, published)
}

// TestSharedSessionBoundToItsPath: a shared session opened on a profile's
// path is unknown (404) on another path of another replica, which does
// not even read it from Redis, and still serves on its own path there.
func TestSharedSessionBoundToItsPath(t *testing.T) {
	_, replicas, redisAddr := sharedReplicasWithRedis(t, 2, func(_ int, c *config.Config) {
		c.Profiles = []config.Profile{{Name: "a"}, {Name: "b"}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	code, hdr, _ := postRaw(ctx, t, replicas[0]+"/a", nil, initialize)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize on /mcp/a: %d", code)
	}
	list := func(path string) (int, *jsonrpc.Message) {
		code, _, msg := postRaw(ctx, t, replicas[1]+path, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		return code, msg
	}
	before := redisCommands(t, redisAddr)
	for _, path := range []string{"/b", ""} {
		if code, msg := list(path); code != http.StatusNotFound {
			t.Errorf("the session of /mcp/a on replica 1's /mcp%s: %d %+v, want 404", path, code, msg)
		}
	}
	if d := diff(redisCommands(t, redisAddr), before); d["hgetall"] != 0 {
		t.Errorf("requests on other paths made replica 1 read the session (%v)", d)
	}
	if code, msg := list("/a"); code != http.StatusOK || msg == nil || msg.Error != nil {
		t.Errorf("the session on its own path on replica 1: %d %+v", code, msg)
	}
}
