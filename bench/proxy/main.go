// Command proxy is the least an HTTP proxy can do: a reverse proxy from
// the standard library that forwards every request to one upstream URL.
// Load tests put it where the gateway goes to measure what one more HTTP
// hop costs by itself, the floor under any gateway's added latency.
//
// With -tcp it is less still: a TCP relay that pairs every connection
// with one to the upstream and copies bytes both ways without reading a
// single header (splice(2) on Linux). No proxy that looks at a request can
// cost less: it is the physical floor of one more hop.
//
//	proxy -listen 127.0.0.1:9300 -to http://127.0.0.1:9100
//	proxy -tcp -listen 127.0.0.1:9301 -to http://127.0.0.1:9100
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	fs := flag.NewFlagSet("proxy", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9300", "listen address")
	to := fs.String("to", "", "upstream base URL (scheme://host:port); request paths are kept")
	relay := fs.Bool("tcp", false, "relay TCP connections instead of HTTP requests")
	_ = fs.Parse(os.Args[1:])
	target, err := url.Parse(*to)
	if err != nil || target.Host == "" {
		fmt.Fprintln(os.Stderr, "proxy: -to must be an absolute URL")
		os.Exit(2)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		// Flush at once, as a gateway must for SSE.
		FlushInterval: -1,
		Transport: &http.Transport{
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy:", err)
		os.Exit(1)
	}
	if *relay {
		fmt.Fprintf(os.Stderr, "proxy: relaying tcp %s -> %s\n", ln.Addr(), target.Host)
		relayTCP(ln, target.Host)
		return
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Fprintf(os.Stderr, "proxy: serving http://%s -> %s\n", ln.Addr(), target)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "proxy:", err)
		os.Exit(1)
	}
}

// relayTCP pairs every accepted connection with a new one to upstream and
// copies both ways until either side closes. It serves until killed.
func relayTCP(ln net.Listener, upstream string) {
	for {
		down, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "proxy:", err)
			os.Exit(1)
		}
		go func() {
			defer down.Close()
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				fmt.Fprintln(os.Stderr, "proxy:", err)
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(up, down)
				_ = up.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(down, up)
			_ = down.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}
