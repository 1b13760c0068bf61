package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// These tests supervise real child processes (the "worker" fake), so
// they run on the real clock; the synctest ones are in resilience_test.go.

// stateLog receives what OnStateChange reports, in order.
type stateLog chan upstream.State

// next returns the next reported state, failing the test at ctx's end.
func (l stateLog) next(t *testing.T, ctx context.Context) upstream.State {
	t.Helper()
	select {
	case st := <-l:
		return st
	case <-ctx.Done():
		t.Fatal("no state reported")
		return upstream.State{}
	}
}

// superviseWorker starts a Supervised of the "worker" fake, with env
// added to its environment, and closes it when the test ends.
func superviseWorker(t *testing.T, ctx context.Context, env map[string]string, restart upstream.RestartOptions) (*upstream.Supervised, stateLog) {
	t.Helper()
	opts := stdioOptions("worker")
	maps.Copy(opts.Env, env)
	opts.Timeout = 30 * time.Second
	states := make(stateLog, 100)
	o := &upstream.SupervisedOptions{Options: *opts, Restart: restart}
	o.OnStateChange = func(st upstream.State) { states <- st }
	s, err := upstream.NewSupervised(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	for _, want := range []upstream.Phase{upstream.Starting, upstream.Ready} {
		if st := states.next(t, ctx); st.Phase != want {
			t.Fatalf("reported %v (%v), want %v", st.Phase, st.Err, want)
		}
	}
	return s, states
}

// supervisedTool calls a tool through s and returns its text.
func supervisedTool(t *testing.T, ctx context.Context, s *upstream.Supervised, name, args string) string {
	t.Helper()
	res, err := s.Call(ctx, "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":`+args+`}`))
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.Error != nil {
		t.Fatalf("call %s: %v", name, res.Error)
	}
	text, isErr := toolText(t, res)
	if isErr {
		t.Fatalf("call %s: tool error %q", name, text)
	}
	return text
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitDead waits until process pid, not a child of ours, is dead: gone,
// or a zombie its new parent has yet to reap. We are not its parent, so
// nothing signals its death to us: poll /proc, for up to 10s.
func awaitDead(t *testing.T, ctx context.Context, pid int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return // gone
		}
		// pid (comm) state ...: comm may hold spaces, the state follows
		// the last ')'.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("process %d still alive: %s", pid, stat)
		}
	}
}

// TestSupervisedStdioKilled kills a stdio server with SIGKILL while calls
// are in flight: they fail at once with ErrClosed, the Supervised reports
// Restarting and starts the server again (Ready, generation 2), and
// nothing is left of the killed server: it is reaped, and the helper it
// started is killed with it.
func TestSupervisedStdioKilled(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, states := superviseWorker(t, ctx, nil, upstream.RestartOptions{Initial: 10 * time.Millisecond})
	pid := atoi(t, supervisedTool(t, ctx, s, "pid", `{}`))
	helper := atoi(t, supervisedTool(t, ctx, s, "spawn", `{}`))

	const n = 3
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := s.Call(ctx, "tools/call", json.RawMessage(`{"name":"block","arguments":{"key":"k"}}`))
			errs <- err
		}()
	}
	supervisedTool(t, ctx, s, "waiting", `{"key":"k","n":`+strconv.Itoa(n)+`}`)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; !errors.Is(err, upstream.ErrClosed) || errors.Is(err, upstream.ErrTimeout) {
			t.Errorf("call in flight: %v, want ErrClosed", err)
		}
	}
	// Timeout is 30s: the calls failed with the process, not with their
	// clock.
	if took := time.Since(killed); took > 10*time.Second {
		t.Errorf("the calls in flight failed %v after the kill", took)
	}

	st := states.next(t, ctx)
	if st.Phase != upstream.Restarting || !errors.Is(st.Err, upstream.ErrClosed) || !strings.Contains(st.Err.Error(), "signal: killed") || st.RetryAt.IsZero() {
		t.Fatalf("after the kill: %v (%v) retry at %v, want restarting, killed, with a retry time", st.Phase, st.Err, st.RetryAt)
	}
	if st := states.next(t, ctx); st.Phase != upstream.Ready || st.Generation != 2 {
		t.Fatalf("after the restart: %v generation %d (%v), want ready generation 2", st.Phase, st.Generation, st.Err)
	}
	if st := s.State(); st.Phase != upstream.Ready || st.Generation != 2 {
		t.Errorf("State() = %v generation %d, want ready generation 2", st.Phase, st.Generation)
	}
	if pid2 := atoi(t, supervisedTool(t, ctx, s, "pid", `{}`)); pid2 == pid {
		t.Errorf("the same process %d after a restart", pid)
	}
	assertGone(t, pid) // reaped by us, not a zombie
	awaitDead(t, ctx, helper)

	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if st := states.next(t, ctx); st.Phase != upstream.Stopped {
		t.Errorf("after Close: %v, want stopped", st.Phase)
	}
}

// TestSupervisedStdioCrashLoop: a server that crashes on every start after
// the first is started CrashLimit times in all, then left Failed with an
// error that says "crash loop".
func TestSupervisedStdioCrashLoop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	file := filepath.Join(t.TempDir(), "starts")
	s, states := superviseWorker(t, ctx, mcptest.WorkerStarts(file, 2, 3, 4, 5, 6), upstream.RestartOptions{
		Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, CrashLimit: 3,
	})
	pid := atoi(t, supervisedTool(t, ctx, s, "pid", `{}`))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var phases []upstream.Phase
	var st upstream.State
	for st.Phase != upstream.Failed {
		st = states.next(t, ctx)
		phases = append(phases, st.Phase)
	}
	// The kill, then two starts that crash: the third crash within the
	// window stops the restarts.
	if diff := cmp.Diff([]upstream.Phase{upstream.Restarting, upstream.Restarting, upstream.Failed}, phases); diff != "" {
		t.Errorf("reported phases (-want +got):\n%s", diff)
	}
	if msg := st.Err.Error(); !strings.Contains(msg, "crash loop: 3 crashes") || !strings.Contains(msg, "exit status 3") {
		t.Errorf("failed with %q, want a crash loop whose last crash exited with status 3", msg)
	}
	if got := mcptest.Starts(file); got != 3 {
		t.Errorf("%d starts, want 3", got)
	}
	_, err := s.Call(ctx, "tools/call", json.RawMessage(`{"name":"pid","arguments":{}}`))
	var ue *upstream.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, upstream.ErrNotReady) || !ue.RetryAt.IsZero() || !strings.Contains(err.Error(), "crash loop") {
		t.Errorf("call after a crash loop: %v, want an UnavailableError (not ready, crash loop) with no retry", err)
	}
	assertGone(t, pid)
}
