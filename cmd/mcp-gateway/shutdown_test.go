package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// TestShutdownEndsWithAStuckStream: a stream whose host stopped reading,
// written by a handler with no deadline of its own, does not hold the
// shutdown past its drain deadline: what is left is closed, the handler's
// write fails and it returns.
func TestShutdownEndsWithAStuckStream(t *testing.T) {
	writing := make(chan struct{})
	returned := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		defer close(returned)
		w.Header().Set("Content-Type", "text/event-stream")
		close(writing)
		chunk := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	c := mcptest.NoRead(t, addr, fmt.Sprintf("GET /mcp HTTP/1.1\r\nHost: %s\r\n\r\n", addr))
	defer c.Close()
	<-writing

	done := make(chan struct{})
	go func() {
		defer close(done)
		shutdownHTTP(context.Background(), srv, 50*time.Millisecond, nil)
	}()
	const wait = 30 * time.Second // generous: the event, not its speed
	for what, ch := range map[string]chan struct{}{"shutdown": done, "the stuck handler": returned} {
		select {
		case <-ch:
		case <-time.After(wait):
			t.Fatalf("%s did not end", what)
		}
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve: %v", err)
	}
}
