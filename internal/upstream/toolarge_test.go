package upstream_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// An answer larger than MaxMessageBytes fails its call with a
// TooLargeError that names the limit, on every transport, and the next
// call on the same connection succeeds.
func TestAnswerTooLarge(t *testing.T) {
	const limit = 64 << 10
	cases := map[string]func(t *testing.T) *upstream.Options{
		"stdio": func(t *testing.T) *upstream.Options { return stdioOptions("blob") },
		"sse": func(t *testing.T) *upstream.Options {
			srv := httptest.NewServer(newBlobSSE())
			t.Cleanup(srv.Close)
			return &upstream.Options{Name: "blob", URL: srv.URL, Transport: "sse", ClientInfo: gateway}
		},
	}
	for _, mode := range []string{"json", "chunked", "sse"} {
		cases["streamable-"+mode] = func(t *testing.T) *upstream.Options {
			srv := httptest.NewServer(blobAnswers(mode))
			t.Cleanup(srv.Close)
			return &upstream.Options{Name: "blob", URL: srv.URL, ClientInfo: gateway}
		}
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			o := opts(t)
			o.MaxMessageBytes = limit
			c := start(t, o)
			ctx := testCtx(t)
			for i, size := range []int{limit + 1, 2 * limit, 10, limit - 200, 8 * limit, 10} {
				res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"blob","arguments":{"size":`+strconv.Itoa(size)+`}}`))
				if size > limit {
					var tl *upstream.TooLargeError
					if !errors.As(err, &tl) || tl.Limit != limit || !errors.Is(err, upstream.ErrTooLarge) {
						t.Fatalf("call %d (%d bytes): %v, want a TooLargeError with the limit", i, size, err)
					}
					if !strings.Contains(err.Error(), "max_message_bytes") || !strings.Contains(err.Error(), `"blob"`) {
						t.Errorf("error %q names neither the key nor the upstream", err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("call %d (%d bytes) after an oversize answer: %v", i, size, err)
				}
				if text, _ := toolText(t, res); len(text) != size {
					t.Fatalf("call %d: %d bytes of text, want %d", i, len(text), size)
				}
			}
		})
	}
}

func TestMaxMessageBytesOption(t *testing.T) {
	for _, v := range []int64{-1, 1<<30 + 1} {
		o := stdioOptions("blob")
		o.MaxMessageBytes = v
		if _, err := upstream.New(o); err == nil {
			t.Errorf("MaxMessageBytes %d accepted", v)
		}
	}
}
