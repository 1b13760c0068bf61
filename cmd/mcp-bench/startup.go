package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// startupOptions are the settings of a start-up measurement.
type startupOptions struct {
	argv []string
	// ready is the URL of a gateway's /readyz: the process is ready when
	// it answers 200 and every upstream it lists is "ready". Without it
	// the process is a stdio server, ready when it has answered the
	// handshake and tools/list.
	ready   string
	modern  bool
	runs    int
	timeout time.Duration
	poll    time.Duration
	label   string
	verbose bool
}

// startupResult is the JSON output of a start-up measurement.
type startupResult struct {
	Kind     string    `json:"kind"` // "startup"
	Label    string    `json:"label,omitempty"`
	Target   string    `json:"target"`
	Mode     string    `json:"mode"` // "readyz" or "stdio"
	RunsMS   []float64 `json:"runs_ms"`
	MedianMS float64   `json:"median_ms"`
	MinMS    float64   `json:"min_ms"`
	MaxMS    float64   `json:"max_ms"`
}

func runStartup(ctx context.Context, o startupOptions) (*startupResult, error) {
	if len(o.argv) == 0 {
		return nil, errors.New("no command: give it after --")
	}
	res := &startupResult{Kind: "startup", Label: o.label, Target: strings.Join(o.argv, " "), Mode: "stdio"}
	if o.ready != "" {
		res.Mode = "readyz"
	}
	for range max(o.runs, 1) {
		var d time.Duration
		var err error
		if o.ready != "" {
			d, err = startReadyz(ctx, o)
		} else {
			d, err = startStdioServer(ctx, o)
		}
		if err != nil {
			return nil, err
		}
		res.RunsMS = append(res.RunsMS, ms(d))
	}
	sorted := slices.Sorted(slices.Values(res.RunsMS))
	res.MedianMS, res.MinMS, res.MaxMS = median(sorted), sorted[0], sorted[len(sorted)-1]
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// startReadyz starts a gateway and polls its /readyz until every upstream
// is ready; then it stops the gateway with SIGTERM and waits for it.
func startReadyz(ctx context.Context, o startupOptions) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	if o.verbose {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	t := time.NewTicker(o.poll)
	defer t.Stop()
	for {
		ok, err := gatewayReady(ctx, hc, o.ready)
		if ok {
			d := time.Since(start)
			stop()
			return d, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("the process exited before it was ready: %v", err)
		case <-ctx.Done():
			stop()
			return 0, fmt.Errorf("not ready within %v (last: %v)", o.timeout, err)
		case <-t.C:
		}
	}
}

// gatewayReady reports whether /readyz says the gateway and every
// upstream are ready.
func gatewayReady(ctx context.Context, hc *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var r struct {
		Upstreams []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"upstreams"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return false, err
	}
	for _, u := range r.Upstreams {
		if u.State != "ready" {
			return false, fmt.Errorf("upstream %s is %s", u.Name, u.State)
		}
	}
	return true, nil
}

// startStdioServer starts a stdio server and times its handshake and a
// tools/list: what a host waits for before its first call.
func startStdioServer(ctx context.Context, o startupOptions) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	s, err := startStdio(ctx, o.argv, o.modern, "", []byte("{}"))
	if err != nil {
		return 0, err
	}
	defer s.close()
	params := []byte(nil)
	if o.modern {
		params = []byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernVersion + `","io.modelcontextprotocol/clientCapabilities":{}}}`)
	}
	if _, _, err := s.request(ctx, "tools/list", params); err != nil {
		return 0, fmt.Errorf("tools/list: %w", err)
	}
	return time.Since(start), nil
}
