package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// These tests run under testing/synctest, with a fake clock, against
// servers in the same process (mcptest.HandlerClient): breakers,
// timeouts and backoff are checked to the nanosecond, without waiting.

// rawServer is a modern Streamable HTTP server whose answers to requests
// other than server/discover a test writes.
type rawServer struct {
	// answer answers a request other than server/discover.
	answer func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message)
	// discover, if set, answers server/discover; nil answers as a modern
	// server.
	discover func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message)

	mu      sync.Mutex
	methods []string // of every request received, in order
}

func (f *rawServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Decode(body)
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.mu.Lock()
	f.methods = append(f.methods, m.Method)
	f.mu.Unlock()
	switch {
	case m.Method == "server/discover" && f.discover == nil:
		writeResult(w, m.ID, string(mcptest.BlobResult(m.Method, nil, nil)))
	case m.Method == "server/discover":
		f.discover(w, r, m)
	default:
		f.answer(w, r, m)
	}
}

// received returns the methods of the requests received so far, but
// server/discover.
func (f *rawServer) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.methods {
		if m != "server/discover" {
			out = append(out, m)
		}
	}
	return out
}

func (f *rawServer) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

func writeResult(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jsonrpc.AppendResult(nil, id, json.RawMessage(result)))
}

func answerStatus(code int) func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
	return func(w http.ResponseWriter, _ *http.Request, _ *jsonrpc.Message) {
		http.Error(w, "down", code)
	}
}

func answerResult(result string) func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
	return func(w http.ResponseWriter, _ *http.Request, m *jsonrpc.Message) { writeResult(w, m.ID, result) }
}

func answerRPCError(w http.ResponseWriter, _ *http.Request, m *jsonrpc.Message) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(jsonrpc.AppendError(nil, m.ID, &jsonrpc.Error{Code: -32603, Message: "tool exploded"}))
}

// answerNever waits until the caller goes away.
func answerNever(_ http.ResponseWriter, r *http.Request, _ *jsonrpc.Message) { <-r.Context().Done() }

// discoverOnce answers the first server/discover (the handshake) as a
// modern server, and never one after it: with answerNever, a server
// that went silent for everyone, probes included.
func discoverOnce() func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
	var once atomic.Bool
	return func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
		if once.CompareAndSwap(false, true) {
			writeResult(w, m.ID, string(mcptest.BlobResult(m.Method, nil, nil)))
			return
		}
		<-r.Context().Done()
	}
}

// answerProgress answers on an SSE stream: n notifications/progress for
// token, every apart, then the result (n < 0: progress forever).
func answerProgress(token string, every time.Duration, n int) func(http.ResponseWriter, *http.Request, *jsonrpc.Message) {
	return func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		event := func(msg []byte) bool {
			_, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			return err == nil
		}
		for i := 0; n < 0 || i < n; i++ {
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
			if !event(jsonrpc.AppendNotification(nil, "notifications/progress", json.RawMessage(`{"progressToken":`+token+`,"progress":`+fmt.Sprint(i+1)+`}`))) {
				return
			}
		}
		event(jsonrpc.AppendResult(nil, m.ID, json.RawMessage(`{"content":[]}`)))
	}
}

// memOptions are the options of a client of f over HTTP in process.
func memOptions(f http.Handler) upstream.Options {
	return upstream.Options{Name: "mem", URL: "http://upstream.test/mcp", Transport: "streamable-http", HTTPClient: mcptest.HandlerClient(f), ClientInfo: gateway}
}

// states collects what OnStateChange reports.
type states struct {
	mu   sync.Mutex
	list []upstream.State
}

func (s *states) add(st upstream.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, st)
}

func (s *states) all() []upstream.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]upstream.State(nil), s.list...)
}

func (s *states) last() upstream.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 0 {
		return upstream.State{}
	}
	return s.list[len(s.list)-1]
}

// startSupervised starts a Supervised; the test must Close it inside its
// bubble.
func startSupervised(t *testing.T, o *upstream.SupervisedOptions) (*upstream.Supervised, *states) {
	t.Helper()
	st := &states{}
	o.OnStateChange = st.add
	s, err := upstream.NewSupervised(o)
	if err != nil {
		t.Fatalf("NewSupervised: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		s.Close()
		t.Fatalf("Start: %v", err)
	}
	return s, st
}

func echoParams() json.RawMessage {
	return json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)
}

func TestBreakerOpensOnTransportFailures(t *testing.T) {
	tests := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, *jsonrpc.Message)
		// cancel: the caller gives up after a second (before the 10s
		// timeout).
		cancel bool
		// silent: the server answers no probe after its handshake.
		silent   bool
		wantOpen bool
	}{
		{name: "HTTP 503", answer: answerStatus(http.StatusServiceUnavailable), wantOpen: true},
		{name: "HTTP 500", answer: answerStatus(http.StatusInternalServerError), wantOpen: true},
		{name: "malformed answer", answer: func(w http.ResponseWriter, _ *http.Request, _ *jsonrpc.Message) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{not json")
		}, wantOpen: true},
		{name: "timeout, probes unanswered", answer: answerNever, silent: true, wantOpen: true},
		// One caller's calls time out, but the server answers the probe
		// sent then: slow for that caller, not failing.
		{name: "timeout, probes answered", answer: answerNever},
		{name: "JSON-RPC error", answer: answerRPCError},
		{name: "tool error", answer: answerResult(`{"content":[{"type":"text","text":"no"}],"isError":true}`)},
		{name: "caller cancels", answer: answerNever, cancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &rawServer{answer: tt.answer}
				if tt.silent {
					f.discover = discoverOnce()
				}
				o := &upstream.SupervisedOptions{Options: memOptions(f), Breaker: upstream.BreakerOptions{Failures: 3, Cooldown: time.Minute}}
				o.Timeout = 10 * time.Second
				s, st := startSupervised(t, o)
				defer s.Close()
				// Twice the threshold: an ignored outcome must not open it
				// however often it comes.
				var openedAt time.Time
				for i := range 6 {
					ctx, cancel := context.WithCancel(context.Background())
					if tt.cancel {
						time.AfterFunc(time.Second, cancel)
					}
					_, err := s.Call(ctx, "tools/call", echoParams())
					cancel()
					if errors.Is(err, upstream.ErrBreakerOpen) {
						if i != 3 {
							t.Fatalf("call %d: breaker open, want it open from call 3 on", i)
						}
						openedAt = time.Now()
						break
					}
				}
				synctest.Wait()
				sent := len(f.received())
				if !tt.wantOpen {
					if sent != 6 || s.State().Breaker != upstream.BreakerClosed {
						t.Fatalf("%d calls sent, breaker %v; want 6 sent and the breaker closed", sent, s.State().Breaker)
					}
					return
				}
				if openedAt.IsZero() {
					t.Fatal("the breaker did not open")
				}
				// While open: at once, no I/O, and it says when.
				start := time.Now()
				_, err := s.Call(context.Background(), "tools/call", echoParams())
				var ue *upstream.UnavailableError
				if !errors.As(err, &ue) || !errors.Is(err, upstream.ErrBreakerOpen) {
					t.Fatalf("call while open: %v, want an UnavailableError with ErrBreakerOpen", err)
				}
				if errors.Is(err, upstream.ErrTimeout) {
					t.Errorf("call while open: %v matches ErrTimeout", err)
				}
				if time.Since(start) != 0 {
					t.Errorf("call while open took %v", time.Since(start))
				}
				if got := len(f.received()); got != 3 {
					t.Errorf("%d calls reached the server, want 3", got)
				}
				if got := st.last(); got.Breaker != upstream.BreakerOpen || !got.RetryAt.Equal(ue.RetryAt) {
					t.Errorf("last state = breaker %v, retry at %v; want open, %v", got.Breaker, got.RetryAt, ue.RetryAt)
				}
				if want := openedAt.Add(time.Minute); !ue.RetryAt.Equal(want) {
					t.Errorf("RetryAt = %v, want %v", ue.RetryAt, want)
				}
				if got := s.State().Since; !got.Equal(openedAt) {
					t.Errorf("Since = %v, want the breaker's opening, %v", got, openedAt)
				}
				if !strings.Contains(err.Error(), "retried at") || ue.Last == nil {
					t.Errorf("error %q: want the last failure and when it is retried", err)
				}
			})
		})
	}
}

func TestBreakerProbe(t *testing.T) {
	for _, recovers := range []bool{true, false} {
		t.Run(fmt.Sprintf("recovers=%v", recovers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The server is up for the handshake, then down: it
				// answers everything, the probe included, with 502.
				var mu sync.Mutex
				down := false
				isDown := func() bool {
					mu.Lock()
					defer mu.Unlock()
					return down
				}
				f := &rawServer{answer: func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
					if isDown() {
						answerStatus(http.StatusBadGateway)(w, r, m)
						return
					}
					writeResult(w, m.ID, `{"content":[]}`)
				}}
				f.discover = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
					if isDown() {
						answerStatus(http.StatusBadGateway)(w, r, m)
						return
					}
					writeResult(w, m.ID, string(mcptest.BlobResult(m.Method, nil, nil)))
				}
				o := &upstream.SupervisedOptions{Options: memOptions(f), Breaker: upstream.BreakerOptions{Failures: 2, Cooldown: 30 * time.Second}}
				s, st := startSupervised(t, o)
				defer s.Close()
				mu.Lock()
				down = true
				mu.Unlock()
				for range 2 {
					s.Call(context.Background(), "tools/call", echoParams())
				}
				synctest.Wait()
				if got := s.State().Breaker; got != upstream.BreakerOpen {
					t.Fatalf("breaker %v after 2 failures, want open", got)
				}
				discovers := f.count("server/discover")
				mu.Lock()
				down = !recovers
				mu.Unlock()
				openedAt := time.Now()
				time.Sleep(30*time.Second - time.Nanosecond)
				synctest.Wait()
				if f.count("server/discover") != discovers {
					t.Fatal("probe sent before the cooldown ended")
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				// The Supervised probes on its own: server/discover, since
				// the server is modern.
				if got := f.count("server/discover") - discovers; got != 1 {
					t.Fatalf("%d probes, want 1", got)
				}
				got := s.State()
				if recovers {
					if got.Breaker != upstream.BreakerClosed || st.last().Breaker != upstream.BreakerClosed {
						t.Fatalf("after a good probe: breaker %v (reported %v), want closed", got.Breaker, st.last().Breaker)
					}
					if _, err := s.Call(context.Background(), "tools/call", echoParams()); err != nil {
						t.Fatalf("call after recovery: %v", err)
					}
					return
				}
				if want := openedAt.Add(60 * time.Second); got.Breaker != upstream.BreakerOpen || !got.RetryAt.Equal(want) {
					t.Fatalf("after a failed probe: breaker %v, retry at %v; want open until %v", got.Breaker, got.RetryAt, want)
				}
				// And again after another cooldown.
				time.Sleep(30 * time.Second)
				synctest.Wait()
				if got := f.count("server/discover") - discovers; got != 2 {
					t.Fatalf("%d probes after two cooldowns, want 2", got)
				}
			})
		})
	}
}

func TestBreakerOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &rawServer{answer: answerStatus(http.StatusServiceUnavailable)}
		s, _ := startSupervised(t, &upstream.SupervisedOptions{Options: memOptions(f), Breaker: upstream.BreakerOptions{Failures: -1}})
		defer s.Close()
		for range 20 {
			if _, err := s.Call(context.Background(), "tools/call", echoParams()); errors.Is(err, upstream.ErrBreakerOpen) {
				t.Fatal("a breaker turned off opened")
			}
		}
	})
}

func TestProgressExtendsTimeout(t *testing.T) {
	const token = `"tok-1"`
	tests := []struct {
		name       string
		maxTimeout time.Duration
		answer     func(http.ResponseWriter, *http.Request, *jsonrpc.Message)
		wantErr    error
		want       time.Duration // how long the call lasts
	}{
		{name: "progress keeps it alive", answer: answerProgress(token, 5*time.Second, 7), want: 35 * time.Second},
		{name: "no progress", answer: answerProgress(token, 15*time.Second, 1), wantErr: upstream.ErrTimeout, want: 10 * time.Second},
		{name: "gap longer than the timeout", answer: answerProgress(token, 11*time.Second, 3), wantErr: upstream.ErrTimeout, want: 10 * time.Second},
		{name: "up to the maximum", answer: answerProgress(token, 5*time.Second, -1), wantErr: upstream.ErrTimeout, want: 60 * time.Second},
		{name: "default maximum", maxTimeout: -2, answer: answerProgress(token, 5*time.Second, -1), wantErr: upstream.ErrTimeout, want: 100 * time.Second},
		{name: "another token", answer: answerProgress(`"tok-2"`, 5*time.Second, 7), wantErr: upstream.ErrTimeout, want: 10 * time.Second},
		{name: "extension off", maxTimeout: -1, answer: answerProgress(token, 5*time.Second, 7), wantErr: upstream.ErrTimeout, want: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &rawServer{answer: tt.answer}
				o := memOptions(f)
				o.Timeout, o.MaxTimeout = 10*time.Second, 60*time.Second
				switch tt.maxTimeout {
				case -1:
					o.MaxTimeout = -1
				case -2:
					o.MaxTimeout = 0 // 10 × Timeout
				}
				c, err := upstream.New(&o)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				_, err = c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"slow","_meta":{"progressToken":`+token+`}}`))
				if took := time.Since(start); took != tt.want {
					t.Errorf("the call took %v, want %v", took, tt.want)
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if err != nil && tt.want > 10*time.Second && !strings.Contains(err.Error(), "extended by progress") {
					t.Errorf("err = %q, want it to say the timeout was extended", err)
				}
			})
		})
	}
}

func TestMaxTimeoutValidation(t *testing.T) {
	o := memOptions(&rawServer{})
	o.Timeout, o.MaxTimeout = time.Minute, time.Second
	if _, err := upstream.New(&o); err == nil || !strings.Contains(err.Error(), "max timeout") {
		t.Errorf("MaxTimeout below Timeout: %v, want an error", err)
	}
}

// gate holds the tools/call requests of a rawServer until released.
type gate struct {
	release chan struct{}
}

func (g *gate) answer(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
	select {
	case <-g.release:
		writeResult(w, m.ID, `{"content":[]}`)
	case <-r.Context().Done():
	}
}

func TestInFlightLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{release: make(chan struct{})}
		f := &rawServer{answer: g.answer}
		o := memOptions(f)
		o.Timeout, o.MaxInFlight, o.MaxQueue = 10*time.Second, 2, 2
		c, err := upstream.New(&o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		type result struct {
			i   int
			err error
			at  time.Duration
		}
		results := make(chan result, 10)
		start := time.Now()
		call := func(ctx context.Context, i int) {
			_, err := c.Call(ctx, "tools/call", echoParams())
			results <- result{i, err, time.Since(start)}
		}
		for i := range 2 {
			go call(context.Background(), i)
		}
		synctest.Wait()
		if got := f.count("tools/call"); got != 2 {
			t.Fatalf("%d calls reached the server, want 2", got)
		}
		// Two wait in the queue; one of them gives up.
		queuedCtx, cancelQueued := context.WithCancel(context.Background())
		go call(context.Background(), 2)
		synctest.Wait()
		go call(queuedCtx, 3)
		synctest.Wait()
		if got := f.count("tools/call"); got != 2 {
			t.Fatalf("%d calls reached the server with the slots taken, want 2", got)
		}
		// The queue is full: the next fails at once.
		_, err = c.Call(context.Background(), "tools/call", echoParams())
		if !errors.Is(err, upstream.ErrOverloaded) || time.Since(start) != 0 {
			t.Fatalf("call with a full queue: %v after %v, want ErrOverloaded at once", err, time.Since(start))
		}
		cancelQueued()
		if r := <-results; r.i != 3 || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled queued call: %d %v, want call 3 cancelled", r.i, r.err)
		}
		// A slot frees: the first queued call goes out.
		g.release <- struct{}{}
		synctest.Wait()
		if got := f.count("tools/call"); got != 3 {
			t.Fatalf("%d calls reached the server after a release, want 3", got)
		}
		close(g.release)
		var got []int
		for range 3 {
			r := <-results
			if r.err != nil {
				t.Errorf("call %d: %v", r.i, r.err)
			}
			got = append(got, r.i)
		}
		if len(got) != 3 {
			t.Fatalf("got %v", got)
		}
	})
}

// TestQueueWaitIsBoundedByTimeout: a call's Timeout covers its wait for
// a slot as well as the request. With MaxInFlight 1, a first call holds
// the slot from 0s and a second one queues at 4s.
func TestQueueWaitIsBoundedByTimeout(t *testing.T) {
	const token = `"tok-q"`
	tests := []struct {
		name string
		// first answers the first call.
		first func(http.ResponseWriter, *http.Request, *jsonrpc.Message)
		// The queued call's error and the calls that reached the server.
		wantErr  error
		wantSent int
		// The first call's error and when it ends.
		wantFirstErr error
		wantFirstEnd time.Duration
	}{
		{
			// Progress keeps the first call (and its slot) alive past
			// 14s: the queued call is never sent, and fails with
			// ErrOverloaded once its own 10s are over.
			name:         "no slot frees in time",
			first:        answerProgress(token, 5*time.Second, -1),
			wantErr:      upstream.ErrOverloaded,
			wantSent:     1,
			wantFirstErr: upstream.ErrTimeout,
			wantFirstEnd: 60 * time.Second,
		},
		{
			// The first call times out at 10s; its slot then goes to the
			// queued call, which is sent with what is left of its 10s,
			// and times out at 14s.
			name:         "a slot frees in time",
			first:        answerNever,
			wantErr:      upstream.ErrTimeout,
			wantSent:     2,
			wantFirstErr: upstream.ErrTimeout,
			wantFirstEnd: 10 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				n := 0
				f := &rawServer{answer: func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
					mu.Lock()
					n++
					first := n == 1
					mu.Unlock()
					if first {
						tt.first(w, r, m)
						return
					}
					answerNever(w, r, m)
				}}
				o := memOptions(f)
				o.Timeout, o.MaxTimeout, o.MaxInFlight = 10*time.Second, 60*time.Second, 1
				c, err := upstream.New(&o)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				type result struct {
					err error
					end time.Duration
				}
				first := make(chan result, 1)
				go func() {
					_, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"slow","_meta":{"progressToken":`+token+`}}`))
					first <- result{err, time.Since(start)}
				}()
				synctest.Wait()
				time.Sleep(4 * time.Second)
				queued := time.Now()
				_, err = c.Call(context.Background(), "tools/call", echoParams())
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("queued call: %v, want %v", err, tt.wantErr)
				}
				if tt.wantErr == upstream.ErrOverloaded && errors.Is(err, upstream.ErrTimeout) {
					t.Errorf("queued call: %v matches ErrTimeout", err)
				}
				if took := time.Since(queued); took != 10*time.Second {
					t.Errorf("the queued call took %v, want 10s", took)
				}
				r := <-first
				if !errors.Is(r.err, tt.wantFirstErr) || r.end != tt.wantFirstEnd {
					t.Errorf("first call: %v at %v, want %v at %v", r.err, r.end, tt.wantFirstErr, tt.wantFirstEnd)
				}
				if got := f.count("tools/call"); got != tt.wantSent {
					t.Errorf("%d calls reached the server, want %d", got, tt.wantSent)
				}
			})
		})
	}
}

// TestUnreachableURLServerTriedUntilUp: a URL server that answers 503
// from start-up on is tried again, with backoff up to 5 s, for as long as
// it takes (no crash loop), and is connected within one delay of coming up.
func TestUnreachableURLServerTriedUntilUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var attempts []time.Duration
		start := time.Now()
		up := 3 * time.Minute // the server comes up three minutes after the gateway
		f := &rawServer{answer: answerResult(`{"content":[]}`)}
		f.discover = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
			mu.Lock()
			attempts = append(attempts, time.Since(start))
			mu.Unlock()
			if time.Since(start) < up {
				http.Error(w, "starting up", http.StatusServiceUnavailable)
				return
			}
			writeResult(w, m.ID, string(mcptest.BlobResult(m.Method, nil, nil)))
		}
		st := &states{}
		o := &upstream.SupervisedOptions{Options: memOptions(f)}
		o.OnStateChange = st.add
		s, err := upstream.NewSupervised(o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Start(context.Background()); err == nil {
			t.Fatal("Start succeeded against a server that is down")
		}
		time.Sleep(up + 10*time.Second)
		synctest.Wait()
		mu.Lock()
		got := append([]time.Duration(nil), attempts...)
		mu.Unlock()
		// 250ms doubling, each ±20%, up to DefaultReconnectMaxDelay; no
		// number of failed connects is a crash loop.
		want := 250 * time.Millisecond
		for i := 0; i+1 < len(got); i, want = i+1, min(2*want, config.DefaultReconnectMaxDelay) {
			if gap := got[i+1] - got[i]; gap < want*8/10 || gap > want*12/10 {
				t.Errorf("gap %d = %v, want %v ±20%%", i, gap, want)
			}
		}
		if n := len(got); n < 30 || got[n-1] < up {
			t.Fatalf("%d start attempts at %v, want one every 5 s until the server is up", n, got)
		}
		if at := got[len(got)-1]; at-up > config.DefaultReconnectMaxDelay*12/10 {
			t.Errorf("connected %v after the server came up, want within %v", at-up, config.DefaultReconnectMaxDelay*12/10)
		}
		if final := s.State(); final.Phase != upstream.Ready || final.Generation != 1 {
			t.Errorf("final state %v (generation %d, %v), want ready", final.Phase, final.Generation, final.Err)
		}
		for _, s := range st.all() {
			if s.Phase == upstream.Failed {
				t.Errorf("reported failed (%v): a URL server that cannot be reached has not crashed", s.Err)
			}
		}
	})
}

func TestRestartRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		failures := 2
		f := &rawServer{answer: answerResult(`{"content":[]}`)}
		f.discover = func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
			mu.Lock()
			defer mu.Unlock()
			if failures > 0 {
				failures--
				http.Error(w, "starting up", http.StatusServiceUnavailable)
				return
			}
			writeResult(w, m.ID, string(mcptest.BlobResult(m.Method, nil, nil)))
		}
		st := &states{}
		o := &upstream.SupervisedOptions{Options: memOptions(f), Restart: upstream.RestartOptions{Initial: time.Second}}
		o.OnStateChange = st.add
		s, err := upstream.NewSupervised(o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Start(context.Background()); err == nil {
			t.Fatal("Start succeeded against a server that is down")
		}
		_, err = s.Call(context.Background(), "tools/call", echoParams())
		var ue *upstream.UnavailableError
		if !errors.As(err, &ue) || ue.RetryAt.IsZero() {
			t.Fatalf("call while restarting: %v, want an UnavailableError with a retry time", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		got := s.State()
		if got.Phase != upstream.Ready || got.Generation != 1 || got.Era != upstream.EraModern {
			t.Fatalf("state %+v, want ready, generation 1, modern", got)
		}
		if _, err := s.Call(context.Background(), "tools/call", echoParams()); err != nil {
			t.Fatalf("call once ready: %v", err)
		}
		if last := st.last(); last.Phase != upstream.Ready || last.Generation != 1 {
			t.Errorf("last reported %v generation %d, want ready generation 1", last.Phase, last.Generation)
		}
	})
}

func TestSupervisedOptionsValidation(t *testing.T) {
	good := memOptions(&rawServer{})
	tests := []struct {
		name string
		opts *upstream.SupervisedOptions
		want string
	}{
		{"nil", nil, "nil options"},
		{"bad connection", &upstream.SupervisedOptions{}, "name is required"},
		{"negative delay", &upstream.SupervisedOptions{Options: good, Restart: upstream.RestartOptions{Initial: -1}}, "negative restart delay"},
		{"max below initial", &upstream.SupervisedOptions{Options: good, Restart: upstream.RestartOptions{Initial: time.Minute, Max: time.Second}}, "shorter than the first"},
		{"negative cooldown", &upstream.SupervisedOptions{Options: good, Breaker: upstream.BreakerOptions{Cooldown: -1}}, "negative breaker cooldown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := upstream.NewSupervised(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// legacyServer is a legacy Streamable HTTP server (session "s1") whose
// tools/call requests never get an answer. It records when each
// tools/call's request ended, and the notifications it receives.
type legacyServer struct {
	mu    sync.Mutex
	calls []json.RawMessage // ids of tools/call requests
	ended []time.Time       // when their requests' contexts ended
	notes []*jsonrpc.Message
}

func (f *legacyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		http.Error(w, "no stream", http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	switch {
	case m.Method == "server/discover":
		http.Error(w, "Bad Request: no session", http.StatusBadRequest)
	case m.Method == "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		writeResult(w, m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}`)
	case m.IsNotification():
		f.mu.Lock()
		f.notes = append(f.notes, m)
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/call":
		f.mu.Lock()
		f.calls = append(f.calls, append(json.RawMessage(nil), m.ID...))
		f.mu.Unlock()
		<-r.Context().Done()
		f.mu.Lock()
		f.ended = append(f.ended, time.Now())
		f.mu.Unlock()
	default:
		writeResult(w, m.ID, `{}`)
	}
}

// cancelled returns the requestId of every notifications/cancelled.
func (f *legacyServer) cancelled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, n := range f.notes {
		if n.Method == "notifications/cancelled" {
			id, _ := jsonrpc.Field(n.Params, "requestId")
			ids = append(ids, string(id))
		}
	}
	return ids
}

// TestTimeoutCancelsUpstream: a server that never answers gets the call
// failed with ErrTimeout at the timeout to the nanosecond, and hears that
// the call is abandoned: its request's stream is closed at that moment
// (the cancellation of a modern server), and a legacy server also gets
// notifications/cancelled naming the request.
func TestTimeoutCancelsUpstream(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lf := &legacyServer{}
				var mu sync.Mutex
				var ended []time.Time
				mf := &rawServer{answer: func(_ http.ResponseWriter, r *http.Request, _ *jsonrpc.Message) {
					<-r.Context().Done()
					mu.Lock()
					ended = append(ended, time.Now())
					mu.Unlock()
				}}
				var h http.Handler = mf
				if legacy {
					h = lf
				}
				o := memOptions(h)
				o.Timeout = 10 * time.Second
				c, err := upstream.New(&o)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				if want := map[bool]upstream.Era{false: upstream.EraModern, true: upstream.EraLegacy}[legacy]; c.Era() != want {
					t.Fatalf("era %v, want %v", c.Era(), want)
				}
				start := time.Now()
				_, err = c.Call(context.Background(), "tools/call", echoParams())
				if took := time.Since(start); !errors.Is(err, upstream.ErrTimeout) || took != o.Timeout {
					t.Fatalf("call: %v after %v, want ErrTimeout after %v", err, took, o.Timeout)
				}
				synctest.Wait()
				if legacy {
					lf.mu.Lock()
					ended, calls := lf.ended, lf.calls
					lf.mu.Unlock()
					if len(calls) != 1 || len(ended) != 1 || !ended[0].Equal(start.Add(o.Timeout)) {
						t.Fatalf("calls %s ended at %v, want one ended at the timeout", calls, ended)
					}
					if diff := cmp.Diff([]string{string(calls[0])}, lf.cancelled()); diff != "" {
						t.Errorf("notifications/cancelled requestIds (-want +got):\n%s", diff)
					}
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if len(ended) != 1 || !ended[0].Equal(start.Add(o.Timeout)) {
					t.Errorf("the server's request ended at %v, want at the timeout", ended)
				}
			})
		})
	}
}
