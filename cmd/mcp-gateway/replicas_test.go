package main

// The replica tests run three real gateway processes that share their
// state in a real redis-server, behind a real haproxy that balances round
// robin with no stickiness, and drive them with Go SDK hosts of both eras
// (the harness is replicas_harness_test.go). Run them with
//
//	go test -race -count=1 -run 'TestReplicas' -v ./cmd/mcp-gateway
//
// They need redis-server and haproxy (.ci/run installs them); without
// them they skip.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// replicaLoadRate is the calls per second of the load, all hosts
	// together.
	replicaLoadRate = 200
	// hostsPerEra is how many hosts of each era the load runs.
	hostsPerEra = 4
	// loadPhase is how long the load runs before and after an event.
	loadPhase = 3 * time.Second
	// killAnswered bounds how long after a SIGKILL a call that was in
	// flight on the killed replica may take to get its answer or its
	// closed stream: a generous bound on an event (haproxy sees the
	// connection close at once), not a measure of speed.
	killAnswered = 5 * time.Second
)

// sdkRejectedByTransport is the code of the Go SDK's error for a request
// its transport could not complete (jsonrpc2.ErrRejected).
const sdkRejectedByTransport = -32005

// TestReplicasSurviveAKill kills one of three replicas with SIGKILL while
// hosts of both eras call through the balancer: only calls in flight on
// it may fail, and only right then; every host carries on, legacy hosts
// in the same session; modern hosts' MRTR retries complete wherever they
// land; legacy hosts' GET streams resume on a survivor; and a tool added
// upstream afterwards reaches every host.
func TestReplicasSurviveAKill(t *testing.T) {
	rig := startReplicaRig(t, hostsPerEra)
	hosts := rig.hosts()
	warm, cancelWarm := context.WithTimeout(context.Background(), startupWait)
	defer cancelWarm()

	// A change before the load puts an event (with an id) on every legacy
	// host's GET stream, so that a host whose stream is cut has an id to
	// resume from.
	rig.upstream.addTool("before")
	awaitAllTools(warm, t, rig.replicas, hosts, exposed("before"))

	load := startReplicaLoad(t, hosts, replicaLoadRate)
	started := time.Now()
	time.Sleep(loadPhase) // the load's duration, not a wait for an event
	// The victim is the replica with the most legacy GET streams, so that
	// resuming one on another replica is always exercised.
	victim := rig.replicas.replicas[0]
	onReplica := map[string]int{}
	for _, h := range rig.legacy {
		if st := h.streamAt(time.Now(), false); st != nil {
			onReplica[st.replica]++
		}
	}
	for _, r := range rig.replicas.replicas {
		if onReplica[r.name] > onReplica[victim.name] {
			victim = r
		}
	}
	signalled := time.Now()
	rig.replicas.kill(victim)
	// The kill is over once the process is reaped: until then the dying
	// replica may still accept a connection the balancer sends it (and
	// cut it), so a call that started meanwhile was in flight on it.
	killedAt := time.Now()
	t.Logf("killed %s (SIGKILL) at +%v, gone %v later; legacy GET streams per replica: %v", victim.name,
		signalled.Sub(started).Round(time.Millisecond), killedAt.Sub(signalled).Round(time.Microsecond), onReplica)
	time.Sleep(loadPhase) // the load's duration, not a wait for an event
	calls := load.stop()
	stopped := time.Now()

	before, after := statsOf(calls, started, killedAt), statsOf(calls, killedAt, stopped)
	t.Logf("before the kill: %v", before)
	t.Logf("after the kill: %v", after)
	if before.calls < replicaLoadRate || after.calls < replicaLoadRate {
		t.Errorf("the load ran too few calls to mean anything (%d before, %d after the kill)", before.calls, after.calls)
	}

	inFlight, failed := 0, 0
	late := newViolations(t, "failed, and was not in flight at the kill or ended later than "+killAnswered.String()+" after it") // (a)
	forgotten := newViolations(t, "failed with session not found")                                                               // (c)
	afterKill := newViolations(t, "started after the kill and failed")                                                           // (c), (d)
	// A modern ask interrupted by the kill is either cut (its stream
	// closed) or, when its retry reached a survivor while the replica
	// holding the call was dead, told so in an isError result; a JSON-RPC
	// error (requestState unknown) means the retry was not forwarded.
	badRetry := newViolations(t, "were modern asks that failed with a JSON-RPC error or an isError not saying the call was interrupted")
	asksAfter := 0
	for _, c := range calls {
		// In flight at the kill: started before the replica was gone,
		// and not ended before the signal.
		if c.start.Before(killedAt) && !c.end.Before(signalled) {
			inFlight++
		}
		if !c.start.Before(killedAt) && c.modern && c.tool == "ask" {
			asksAfter++
		}
		if c.err == nil {
			continue
		}
		failed++
		if !c.start.Before(killedAt) || c.end.Before(signalled) || c.end.After(killedAt.Add(killAnswered)) {
			late.add(c, started)
		}
		if isSessionMissing(c.err) {
			forgotten.add(c, started)
		}
		if !c.start.Before(killedAt) {
			afterKill.add(c, started)
		}
		// The SDK wraps a cut stream (EOF, a balancer's 502) in its own
		// "rejected by transport" error, -32005: that is not an answer.
		var rpcErr *jsonrpc.Error
		answered := errors.As(c.err, &rpcErr) && rpcErr.Code != sdkRejectedByTransport
		if c.modern && c.tool == "ask" && (answered || c.isError && !strings.Contains(strings.ToLower(c.err.Error()), "interrupted")) {
			badRetry.add(c, started)
		}
	}
	t.Logf("in flight at the kill: %d calls; failed: %d", inFlight, failed)
	late.report()
	forgotten.report()
	afterKill.report()
	badRetry.report()
	// (b)
	if failed > inFlight {
		t.Errorf("%d calls failed, more than the %d in flight at the kill", failed, inFlight)
	}
	if asksAfter == 0 {
		t.Errorf("no modern ask call started after the kill")
	}
	for _, h := range rig.legacy {
		if h.sessionID == "" || h.cs.ID() != h.sessionID {
			t.Errorf("%s: session %q at connect, %q now: the host was made to initialize again", h.name, h.sessionID, h.cs.ID())
		}
	}

	// GET streams carry event ids; one cut by the kill is resumed on a
	// survivor with Last-Event-ID, and since the survivor cannot replay
	// what the victim sent, it tells the host that each list it announces
	// changes of (tools, prompts, resources) may have changed.
	moved, relistened := 0, 0
	announced := make(chan error, 4*len(rig.legacy))
	waits := 0
	for _, h := range rig.legacy {
		st := h.streamAt(killedAt, false)
		if st == nil {
			t.Errorf("%s: no GET stream open at the kill", h.name)
			continue
		}
		if st.ids.Load() == 0 {
			t.Errorf("%s: its GET stream (on %s) carried no SSE event id, though a list change went on it", h.name, st.replica)
		}
		if st.replica != victim.name {
			continue
		}
		moved++
		waits++
		go func() { announced <- h.awaitResumed(killedAt, victim.name) }()
		kinds := h.announcedKinds()
		if len(kinds) == 0 {
			t.Errorf("%s: the gateway announces changes of no list (capabilities %+v)", h.name, h.cs.InitializeResult().Capabilities)
		}
		for _, kind := range kinds {
			waits++
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), startupWait)
				defer cancel()
				if err := h.awaitChangeSince(ctx, kind, killedAt); err != nil {
					announced <- fmt.Errorf("%w (its GET stream was resumed on another replica, which cannot replay what %s sent)", err, victim.name)
					return
				}
				announced <- nil
			}()
		}
	}
	for range waits {
		if err := <-announced; err != nil {
			t.Error(err)
		}
	}
	for _, h := range rig.modern {
		if st := h.streamAt(killedAt, true); st != nil && st.replica == victim.name {
			relistened++
		}
	}
	t.Logf("legacy GET streams moved off %s: %d; modern listen streams on it: %d", victim.name, moved, relistened)

	// (e) a change upstream reaches every host, of both eras, on a
	// survivor: legacy hosts on their GET stream, modern hosts on their
	// listen stream.
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	for _, h := range hosts {
		h.awaitListening(ctx, t)
		drain(h.toolsChanged) // resuming a stream announces list changes of its own
	}
	rig.upstream.addTool("added")
	awaitAllTools(ctx, t, rig.replicas, hosts, exposed("added"))
}

// awaitAllTools waits until every host heard of a change and lists tool.
func awaitAllTools(ctx context.Context, t *testing.T, rs *replicaSet, hosts []*replicaHost, tool string) {
	t.Helper()
	errs := make(chan error, len(hosts))
	for _, h := range hosts {
		go func() { errs <- h.awaitTool(ctx, rs, tool) }()
	}
	for range hosts {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestReplicasRollingRestart restarts the three replicas one at a time
// (SIGTERM, exit, start on the same port, back in rotation) under load:
// no call fails, since a stopping replica leaves the balancer's rotation
// during shutdown.delay and then finishes what it has; legacy hosts keep
// their sessions, and every host still hears of changes.
func TestReplicasRollingRestart(t *testing.T) {
	rig := startReplicaRig(t, hostsPerEra)
	hosts := rig.hosts()

	load := startReplicaLoad(t, hosts, replicaLoadRate)
	started := time.Now()
	time.Sleep(loadPhase / 3) // the load's duration, not a wait for an event
	for _, r := range rig.replicas.replicas {
		from := time.Now()
		rig.replicas.terminate(r)
		// shutdown.delay keeps the replica serving, with /readyz at 503,
		// until the balancer has taken it out of rotation.
		rig.lb.awaitDown(r)
		if !r.proc.alive() {
			t.Errorf("%s exited before haproxy took it out of rotation: shutdown.delay did not hold it", r.name)
		}
		out := time.Now()
		rig.replicas.awaitExit(r)
		stopped := time.Now()
		rig.replicas.start(r)
		rig.replicas.awaitReady(r)
		rig.lb.awaitUp(r)
		t.Logf("%s: out of rotation %v after SIGTERM, exited %v later, back in rotation %v after that",
			r.name, out.Sub(from).Round(time.Millisecond), stopped.Sub(out).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	}
	time.Sleep(loadPhase / 3) // the load's duration, not a wait for an event
	calls := load.stop()
	all := statsOf(calls, started, time.Now())
	t.Logf("during the restarts: %v", all)
	if all.calls < replicaLoadRate {
		t.Errorf("the load ran too few calls to mean anything (%d)", all.calls)
	}
	failures := newViolations(t, "failed during the restarts")
	for _, c := range calls {
		if c.err != nil {
			failures.add(c, started)
		}
	}
	failures.report()
	for _, h := range rig.legacy {
		if h.sessionID == "" || h.cs.ID() != h.sessionID {
			t.Errorf("%s: session %q at connect, %q now: the host was made to initialize again", h.name, h.sessionID, h.cs.ID())
		}
	}

	// Every stream moved off a stopping replica (a legacy GET stream
	// resumed elsewhere, a modern listen stream opened again) still
	// carries changes.
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	for _, h := range hosts {
		h.awaitListening(ctx, t)
		drain(h.toolsChanged)
	}
	rig.upstream.addTool("after_restarts")
	awaitAllTools(ctx, t, rig.replicas, hosts, exposed("after_restarts"))
}

// TestReplicasSessionRevokedEverywhere: a legacy session initialized on
// one replica is served by the others, and once DELETEd on one of them it
// is gone on all three (404).
func TestReplicasSessionRevokedEverywhere(t *testing.T) {
	replicaPeer(t, "redis-server")
	up := startReplicaUpstream(t)
	rs := startReplicas(t, writeReplicaConfig(t, up.url, startRedis(t)), 3)
	r := rs.replicas
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()

	code, header, m := postRaw(ctx, t, r[0].url(), nil,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"revoked","version":"1"}}}`)
	sid := header.Get("Mcp-Session-Id")
	if code != http.StatusOK || m.Error != nil || sid == "" {
		t.Fatalf("initialize on %s: %d, session %q, error %v", r[0].name, code, sid, m.Error)
	}
	session := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	resp := postResponse(ctx, t, r[1].url(), session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized on %s: %d, want 202", r[1].name, resp.StatusCode)
	}
	call := func(i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"on %s"}}}`, 10+i, exposed("echo"), r[i].name)
	}
	for _, i := range []int{1, 2} {
		code, _, m := postRaw(ctx, t, r[i].url(), session, call(i))
		if code != http.StatusOK || m.Error != nil || !strings.Contains(string(m.Result), "on "+r[i].name) {
			t.Fatalf("tools/call on %s in the session from %s: %d, error %v, result %s", r[i].name, r[0].name, code, m.Error, m.Result)
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r[1].url(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range session {
		req.Header.Set(k, v)
	}
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if del.StatusCode/100 != 2 {
		t.Fatalf("DELETE on %s: %d", r[1].name, del.StatusCode)
	}

	for i := range r {
		resp := postResponse(ctx, t, r[i].url(), session, call(i))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("tools/call on %s after DELETE on %s: %d %s, want 404", r[i].name, r[1].name, resp.StatusCode, body)
		}
	}
}

// TestReplicasParkedCallOnADeadReplica: a modern host's call to a legacy
// server that asks for input is parked on the replica that served it; the
// host's retry lands on another replica, which forwards it to the holder.
// When the holder died in between, the retry gets, soon, an isError result
// saying the call was interrupted and may be retried, and retrying it
// completes on a survivor.
func TestReplicasParkedCallOnADeadReplica(t *testing.T) {
	rig := startReplicaRig(t, 1)
	h := rig.modern[0]
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()

	// The host is asked for input once the call is parked: it kills the
	// replica that answered input_required before it answers.
	killed := make(chan *replica, 1)
	var killedAt time.Time
	hook := func() {
		for _, r := range rig.replicas.replicas {
			if r.name == h.lastCallReplica() {
				rig.replicas.kill(r)
				killedAt = time.Now()
				killed <- r
				return
			}
		}
		close(killed)
	}
	h.onElicit.Store(&hook)
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: exposed("ask"), Arguments: map[string]any{"message": "parked"}})
	answered := time.Now()
	h.onElicit.Store(nil)
	var victim *replica
	select {
	case r, ok := <-killed:
		if !ok {
			t.Fatalf("the input_required answer named no replica (X-Replica %q)", h.lastCallReplica())
		}
		victim = r
	default: // the hook runs within CallTool, or not at all
		t.Fatalf("the host was never asked for input: %v, %v", res, err)
	}
	t.Logf("killed %s, which held the parked call; the retry was answered %v later", victim.name, answered.Sub(killedAt).Round(time.Millisecond))
	switch {
	case err != nil:
		t.Errorf("the retry after %s died: %v, want an isError result", victim.name, err)
	case !res.IsError || !strings.Contains(strings.ToLower(allText(res)), "interrupted"):
		t.Errorf("the retry after %s died: isError %v, %q; want isError saying the call was interrupted and may be retried", victim.name, res.IsError, allText(res))
	}
	if answered.Sub(killedAt) > killAnswered {
		t.Errorf("the retry was answered %v after the kill, later than %v", answered.Sub(killedAt), killAnswered)
	}

	// The host retries the whole call, which a survivor completes.
	if got, err := callAll(ctx, h.cs, exposed("ask"), map[string]any{"message": "again"}); err != nil || strings.TrimSpace(got) != "accept "+h.name {
		t.Errorf("calling again after %s died: %q, %v", victim.name, got, err)
	}
}

// violations collects the calls that broke one rule, to report how many
// and the first few, rather than a line per call of a load.
type violations struct {
	t      *testing.T
	rule   string
	calls  []string
	byHost map[string]int
}

func newViolations(t *testing.T, rule string) *violations {
	return &violations{t: t, rule: rule, byHost: map[string]int{}}
}

func (v *violations) add(c callRecord, origin time.Time) {
	v.byHost[c.host]++
	v.calls = append(v.calls, fmt.Sprintf("%s %s [+%v, +%v]: %v", c.host, c.tool,
		c.start.Sub(origin).Round(time.Millisecond), c.end.Sub(origin).Round(time.Millisecond), c.err))
}

func (v *violations) report() {
	v.t.Helper()
	if len(v.calls) == 0 {
		return
	}
	const shown = 5
	v.t.Errorf("%d calls %s (by host: %v); the first ones:\n%s", len(v.calls), v.rule, v.byHost, strings.Join(v.calls[:min(shown, len(v.calls))], "\n"))
}

var metaCSRF = regexp.MustCompile(`<meta name="csrf" content="([^"]+)">`)

// TestReplicasShareConsoleSessions: a console session made on one
// replica is served by the others (the same session: its CSRF token),
// and a logout on one ends it on all, each within its next check.
func TestReplicasShareConsoleSessions(t *testing.T) {
	replicaPeer(t, "redis-server")
	up := startReplicaUpstream(t)
	rs := startReplicas(t, writeReplicaConfig(t, up.url, startRedis(t)), 3)
	r := rs.replicas
	// The replicas listen on loopback without authentication: the
	// console is on, and a visitor gets a session at once.
	get := func(i int, cookie *http.Cookie) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r[i].addr+"/ui", nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	csrf := func(page string) string {
		m := metaCSRF.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token in:\n%s", page)
		}
		return m[1]
	}
	resp, page := get(0, nil)
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusOK || len(cookies) != 1 {
		t.Fatalf("the console on %s: %d, %d cookies", r[0].name, resp.StatusCode, len(cookies))
	}
	cookie, token := cookies[0], csrf(page)
	for _, i := range []int{1, 2} {
		resp, page := get(i, cookie)
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 || csrf(page) != token {
			t.Fatalf("%s did not take over the session made on %s", r[i].name, r[0].name)
		}
	}
	form := url.Values{"csrf": {token}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+r[2].addr+"/ui/logout", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	out, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	if out.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout on %s: %d", r[2].name, out.StatusCode)
	}
	// Each replica checks a session in Redis every few seconds: then
	// it refuses the cookie (303: the browser starts again at the
	// login, which without authentication makes a new session).
	deadline := time.Now().Add(30 * time.Second)
	for _, i := range []int{0, 1} {
		for {
			resp, page := get(i, cookie)
			if resp.StatusCode == http.StatusSeeOther || resp.StatusCode == http.StatusOK && csrf(page) != token {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still serves the session logged out on %s", r[i].name, r[2].name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
