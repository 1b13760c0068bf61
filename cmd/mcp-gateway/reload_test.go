package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// writeUpstreams writes a config with the named echo fakes.
func writeUpstreams(t *testing.T, path string, names ...string) {
	t.Helper()
	var ups []map[string]any
	for _, name := range names {
		command, args, env := mcptest.StdioCommand("echo")
		ups = append(ups, map[string]any{"name": name, "command": command, "args": args, "env": env})
	}
	raw, _ := json.Marshal(map[string]any{"upstreams": ups, "telemetry": map[string]any{"log_level": "info"}})
	// Write then rename, as editors do, so the watcher never reads half
	// a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestReloadDuringLoad runs the real serve command, keeps a steady load of
// calls on one upstream, and reloads the config twice — by editing the
// file, then with SIGHUP — adding one upstream and removing another each
// time. No call of the load may fail.
func TestReloadDuringLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeUpstreams(t, path, "steady", "old")
	addr, _ := serveInProcess(t, path)

	cs, listChanged := listChanges(t, "http://"+addr+"/mcp")
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The steady load on the upstream that stays.
	load := startLoad(cctx, cs, "steady__echo")
	defer load.stop()
	waitTools := func(want, gone string) {
		t.Helper()
		awaitTools(cctx, t, cs, listChanged, want+" to appear and "+gone+" to go", func(names []string) bool {
			return slices.Contains(names, want) && !slices.Contains(names, gone)
		})
	}

	writeUpstreams(t, path, "steady", "new")
	waitTools("new__echo", "old__echo")
	// The file watch may see this write too, which only applies the same
	// config twice.
	writeUpstreams(t, path, "steady", "newer")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitTools("newer__echo", "new__echo")
	// A config with problems is rejected; the running one stays.
	if err := os.WriteFile(path, []byte("upstreams: [{name: bad name}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got, err := callText(cctx, cs, "newer__echo", map[string]any{"text": "still"}); err != nil || got != "still" {
		t.Errorf("after a rejected reload: %q, %v", got, err)
	}
	load.stop()
	if n := load.failures.Load(); n > 0 {
		t.Errorf("%d of %d calls failed during the reloads; first: %v", n, load.calls.Load(), load.firstErr.Load())
	}
	if load.calls.Load() == 0 {
		t.Error("no call ran during the reloads")
	}
	t.Logf("%d calls during two reloads and a rejected one", load.calls.Load())
}

// waitReady polls /readyz until it answers 200: the server is coming up
// in another goroutine, and there is nothing to wait on but the socket.
// serveInProcess runs `mcp-gateway serve --config path` in this process
// on a free loopback port until the test ends, and returns its address,
// once /readyz answers, and its log (printed if the test failed). The
// test fails if serve does not exit cleanly.
func serveInProcess(t *testing.T, path string) (addr string, logs *mcptest.LogBuffer) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, stop := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	logs = &mcptest.LogBuffer{}
	go func() {
		exited <- run(ctx, []string{"serve", "--config", path, "--listen", addr}, nil, io.Discard, logs)
	}()
	t.Cleanup(func() {
		stop()
		if code := <-exited; code != exitOK {
			t.Errorf("serve exited with %d", code)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	waitReady(t, "http://"+addr+"/readyz")
	return addr, logs
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become ready: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watchApplies runs a configWatch on path and returns a channel that
// receives once per apply.
func watchApplies(t *testing.T, path string, poll time.Duration) <-chan struct{} {
	t.Helper()
	applied := make(chan struct{}, 16)
	cw := newConfigWatch(path, slog.New(slog.DiscardHandler), func() { applied <- struct{}{} })
	if poll > 0 {
		if cw.watcher != nil {
			cw.watcher.Close()
			cw.watcher = nil
		}
		cw.pollEvery = poll
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cw.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return applied
}

// expectApply waits for one apply, or fails the test after a minute.
func expectApply(t *testing.T, applied <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-applied:
	case <-time.After(time.Minute):
		t.Fatalf("%s: no reload", what)
	}
}

// TestConfigWatchKubernetesSwap mounts the config as Kubernetes does a
// ConfigMap: gateway.yaml is a symlink through ..data, and an update
// swaps ..data to a new folder without touching gateway.yaml itself.
func TestConfigWatchKubernetesSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(n int, body string) {
		t.Helper()
		ts := filepath.Join(dir, fmt.Sprintf("..v%d", n))
		if err := os.Mkdir(ts, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ts, "gateway.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version(1, "upstreams: []\n")
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.Symlink("..data/gateway.yaml", path); err != nil {
		t.Fatal(err)
	}
	applied := watchApplies(t, path, 0)

	version(2, "upstreams: []\nprefix: always\n")
	expectApply(t, applied, "after the ..data swap")
	version(3, "upstreams: []\nprefix: on_conflict\n")
	expectApply(t, applied, "after the second swap")
}

// TestConfigWatchSameBytes: an event on a file whose bytes did not change
// reloads nothing (editors touch files; Kubernetes re-swaps), SIGHUP
// reloads anyway.
func TestConfigWatchSameBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte("upstreams: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	applies := 0
	cw := newConfigWatch(path, slog.New(slog.DiscardHandler), func() { applies++ })
	defer signal.Stop(cw.hup)
	if cw.watcher != nil {
		defer cw.watcher.Close()
	}
	cw.reload(false)
	if applies != 0 {
		t.Fatalf("unchanged file applied %d times", applies)
	}
	if err := os.WriteFile(path, []byte("upstreams: []\nprefix: always\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cw.reload(false)
	cw.reload(false)
	if applies != 1 {
		t.Fatalf("changed file applied %d times, want 1", applies)
	}
	cw.reload(true)
	if applies != 2 {
		t.Fatalf("forced reload: applied %d times, want 2", applies)
	}
}

// TestConfigWatchPolls covers machines without a file watch: the file is
// read at intervals, and a change is applied.
func TestConfigWatchPolls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte("upstreams: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	applied := watchApplies(t, path, 10*time.Millisecond)
	if err := os.WriteFile(path, []byte("upstreams: []\nprefix: always\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expectApply(t, applied, "after a write")
}
