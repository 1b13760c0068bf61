package upstream_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// rssLimit is the max_message_bytes of the peak RSS measurement.
const rssLimit = 16 << 20

// sizedAnswers answers tools/call {size} with a message of exactly size
// bytes, written from one small buffer, so that the server side
// allocates nothing of the answer's size: the process's peak RSS is the
// client's. sse picks an SSE stream over a chunked JSON body.
func sizedAnswers(sse bool) http.Handler {
	chunk := []byte(strings.Repeat("x", 64<<10))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Decode(body)
		if err != nil || !m.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if m.Method != "tools/call" {
			res := `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+res+`}`)
			return
		}
		a, _ := jsonrpc.Field(m.Params, "arguments")
		raw, _ := jsonrpc.Field(a, "size")
		size, _ := strconv.Atoi(string(raw))
		prefix := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"`
		suffix := `"}]}}`
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: ")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		bw := bufio.NewWriterSize(w, 64<<10)
		bw.WriteString(prefix)
		for n := size - len(prefix) - len(suffix); n > 0; {
			k := min(n, len(chunk))
			if _, err := bw.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
		bw.WriteString(suffix)
		if sse {
			bw.WriteString("\n\n")
		}
		bw.Flush()
	})
}

// procStatus reads a field of /proc/self/status, in bytes.
func procStatus(t testing.TB, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestPeakRSSChild runs in a child process of TestPeakRSS (a fresh
// process, whose peak RSS no other test has raised): four concurrent
// answers of exactly max_message_bytes and one over it, on one upstream.
// It prints the idle RSS and the peak.
func TestPeakRSSChild(t *testing.T) {
	mode := os.Getenv("UPSTREAM_RSS_CHILD")
	if mode == "" {
		t.Skip("run by TestPeakRSS")
	}
	srv := httptest.NewServer(sizedAnswers(mode == "sse"))
	defer srv.Close()
	c := start(t, &upstream.Options{Name: "big", URL: srv.URL, MaxMessageBytes: rssLimit, ClientInfo: gateway})
	ctx := testCtx(t)
	call := func(size int) error {
		res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"big","arguments":{"size":`+strconv.Itoa(size)+`}}`))
		if err == nil && len(res.Result) < size-100 {
			err = fmt.Errorf("a result of %d bytes", len(res.Result))
		}
		return err
	}
	if err := call(1000); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	idle := procStatus(t, "VmRSS")
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 5 {
		size := rssLimit
		if i == 4 {
			size = rssLimit + 1
		}
		wg.Go(func() { errs[i] = call(size) })
	}
	wg.Wait()
	for i, err := range errs[:4] {
		if err != nil {
			t.Fatalf("answer %d at the limit: %v", i, err)
		}
	}
	if !errors.Is(errs[4], upstream.ErrTooLarge) {
		t.Fatalf("answer over the limit: %v", errs[4])
	}
	fmt.Printf("RSS idle=%d peak=%d\n", idle, procStatus(t, "VmHWM"))
}

// TestPeakRSS: with four answers of exactly max_message_bytes in flight
// (and one over it), the gateway's peak RSS stays under 3 x (4 x the
// limit) above its idle RSS.
func TestPeakRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates about 100 MiB")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPeakRSSChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "UPSTREAM_RSS_CHILD="+mode)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var idle, peak int64
			for _, line := range strings.Split(string(out), "\n") {
				if _, err := fmt.Sscanf(line, "RSS idle=%d peak=%d", &idle, &peak); err == nil {
					break
				}
			}
			if peak == 0 {
				t.Fatalf("no measurement in\n%s", out)
			}
			bound := idle + 3*4*rssLimit
			t.Logf("max_message_bytes %d MiB: idle RSS %.1f MiB, peak %.1f MiB (%.2f x 4 x the limit above idle; bound %.0f MiB)",
				rssLimit>>20, float64(idle)/(1<<20), float64(peak)/(1<<20), float64(peak-idle)/(4*rssLimit), float64(bound)/(1<<20))
			if raceEnabled {
				return // shadow memory: no bound
			}
			if peak > bound {
				t.Errorf("peak RSS %d MiB, over the bound of %d MiB", peak>>20, bound>>20)
			}
		})
	}
}
