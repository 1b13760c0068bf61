package mcptest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

func TestHandlerClient(t *testing.T) {
	t.Run("whole body after the handler returns", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := mcptest.HandlerClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Test", "yes")
				w.WriteHeader(http.StatusTeapot)
				_, _ = io.WriteString(w, "hello")
			}))
			// The handler's end must read as io.EOF, however the
			// goroutines are scheduled.
			for range 50 {
				resp, err := c.Get("http://upstream.test/")
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(body) != "hello" || resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Test") != "yes" {
					t.Fatalf("%d %q %q, %v; want 418, X-Test yes, hello", resp.StatusCode, resp.Header.Get("X-Test"), body, err)
				}
			}
		})
	})
	t.Run("no body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := mcptest.HandlerClient(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			for range 50 {
				resp, err := c.Get("http://upstream.test/")
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || len(body) != 0 || resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %q, %v; want 200 and no body", resp.StatusCode, body, err)
				}
			}
		})
	})
	t.Run("streams as written", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			next := make(chan struct{})
			c := mcptest.HandlerClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: 1\n\n")
				<-next
				_, _ = io.WriteString(w, "data: 2\n\n")
			}))
			resp, err := c.Get("http://upstream.test/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); line != "data: 1\n" || err != nil {
				t.Fatalf("first line %q, %v", line, err)
			}
			close(next)
			rest, err := io.ReadAll(br)
			if string(rest) != "\ndata: 2\n\n" || err != nil {
				t.Fatalf("rest %q, %v", rest, err)
			}
		})
	})
	t.Run("closing the body ends the request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var ended atomic.Bool
			c := mcptest.HandlerClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				<-r.Context().Done()
				ended.Store(true)
			}))
			resp, err := c.Get("http://upstream.test/")
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if ended.Load() {
				t.Fatal("the request ended before the body was closed")
			}
			resp.Body.Close()
			synctest.Wait()
			if !ended.Load() {
				t.Fatal("the request did not end when the body was closed")
			}
		})
	})
	t.Run("the request's context ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var ended atomic.Bool
			c := mcptest.HandlerClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				_, _ = w.Write(body)
				<-r.Context().Done()
				ended.Store(true)
			}))
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/", strings.NewReader("ping"))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 4)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("read %q, %v", buf, err)
			}
			cancel()
			if _, err := resp.Body.Read(buf); !errors.Is(err, context.Canceled) {
				t.Errorf("read after cancel: %v, want context.Canceled", err)
			}
			synctest.Wait()
			if !ended.Load() {
				t.Error("the handler's request did not end")
			}
		})
	})
	t.Run("cancelled before the header", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := mcptest.HandlerClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.test/", nil)
			go func() {
				synctest.Wait()
				cancel()
			}()
			if _, err := c.Do(req); !errors.Is(err, context.Canceled) {
				t.Errorf("Do: %v, want context.Canceled", err)
			}
		})
	})
}
