package router

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReconfigure(t *testing.T) {
	changed := make(chan string, 64)
	a := &fakeUpstream{lists: map[string][]string{"tools/list": tools("one")}, closedCh: make(chan struct{})}
	b, arrived, release := blockingUpstream()
	c := &fakeUpstream{lists: map[string][]string{"tools/list": tools("three")}}
	opts := Options{ListWait: -1, OnChange: func(ch Change) { changed <- ch.Method }}
	opts.Upstreams = []UpstreamConfig{
		{Name: "a", Connect: a.connect, Fingerprint: "a1"},
		{Name: "b", Connect: b.connect, Fingerprint: "b1"},
	}
	r := startRouter(t, opts, nil)

	// A call to b is in flight while a is removed and c added.
	done := make(chan *Reply, 1)
	go func() {
		done <- r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"b__work"}`))
	}()
	<-arrived
	opts.Upstreams = []UpstreamConfig{
		{Name: "b", Connect: b.connect, Fingerprint: "b1"},
		{Name: "c", Connect: c.connect, Fingerprint: "c1"},
	}
	if err := r.Reconfigure(&opts); err != nil {
		t.Fatal(err)
	}
	close(release)
	if reply := <-done; reply.Error != nil {
		t.Errorf("the call in flight on the kept upstream failed: %v", reply.Error)
	}
	<-a.closedCh // the removed upstream is stopped
	// c becomes ready on its own goroutine; hosts hear of it.
	want := []string{"b__work", "c__three"}
	for {
		got := listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")
		if cmp.Equal(want, got) {
			break
		}
		if slices.Contains(got, "a__one") {
			t.Fatalf("the removed upstream is still listed: %v", got)
		}
		<-changed
	}
	statuses := map[string]Phase{}
	for _, s := range r.Status() {
		statuses[s.Name] = s.State
	}
	if len(statuses) != 2 || statuses["b"] != PhaseReady || statuses["c"] != PhaseReady {
		t.Errorf("statuses after reload: %v", statuses)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		t.Error("the kept upstream was restarted or closed")
	}
}

// TestReloadRestartsFailed: a reload (SIGHUP) starts again an upstream
// that failed for good, though its settings did not change; one that
// is ready keeps running.
func TestReloadRestartsFailed(t *testing.T) {
	var made []*fakeUpstream
	connect := func(o ConnectOptions) (Upstream, error) {
		f := &fakeUpstream{lists: map[string][]string{"tools/list": tools("back")}}
		if len(made) == 0 {
			f.startErr = errors.New("crash loop: 5 crashes within 1m0s")
		}
		made = append(made, f)
		return f.connect(o)
	}
	ok := &fakeUpstream{lists: map[string][]string{"tools/list": tools("one")}}
	changed := make(chan string, 64)
	opts := Options{ListWait: -1, OnChange: func(ch Change) { changed <- ch.Method }}
	opts.Upstreams = []UpstreamConfig{
		{Name: "f", Connect: connect, Fingerprint: "f1"},
		{Name: "ok", Connect: ok.connect, Fingerprint: "ok1"},
	}
	r := startRouter(t, opts, nil)
	if st := r.Status()[0]; st.State != PhaseFailed {
		t.Fatalf("f is %s, want failed", st.State)
	}
	if err := r.Reconfigure(&opts); err != nil {
		t.Fatal(err)
	}
	giveUp := time.After(time.Minute) // a bound on a failing run, not a timing claim
	for !slices.Contains(listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools"), "f__back") {
		select {
		case <-changed:
		case <-giveUp:
			t.Fatalf("f was not started again: %+v", r.Status()[0])
		}
	}
	if len(made) != 2 {
		t.Errorf("f was connected %d times, want 2", len(made))
	}
	ok.mu.Lock()
	defer ok.mu.Unlock()
	if ok.closed {
		t.Error("the ready upstream was restarted by the reload")
	}
}
