package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// sessionsOptions are the settings of a session memory measurement.
type sessionsOptions struct {
	url      string
	sessions int
	pid      int
	conns    int
	settle   time.Duration
	label    string
	keep     bool // leave the sessions open
}

// sessionsResult is the JSON output of a session memory measurement.
type sessionsResult struct {
	Kind     string `json:"kind"` // "sessions"
	Label    string `json:"label,omitempty"`
	Target   string `json:"target"`
	Sessions int    `json:"sessions"`
	Errors   int    `json:"errors"`
	// IdleKiB is the server's RSS before the sessions open, AfterKiB
	// with them open and idle, and PerSessionKiB the difference per
	// session.
	IdleKiB       int64   `json:"idle_rss_kib"`
	AfterKiB      int64   `json:"rss_kib"`
	PerSessionKiB float64 `json:"per_session_kib"`
	OpenS         float64 `json:"open_s"`
}

// runSessions opens legacy sessions (initialize and
// notifications/initialized, nothing more) and reports how the server's
// RSS grew. The RSS after includes garbage the server has not collected
// yet, so the figure is an upper bound.
func runSessions(ctx context.Context, o sessionsOptions) (*sessionsResult, error) {
	if o.pid == 0 {
		return nil, errors.New("sessions needs the server's -pid")
	}
	u, err := url.Parse(o.url)
	if err != nil {
		return nil, err
	}
	res := &sessionsResult{Kind: "sessions", Label: o.label, Target: o.url}
	sleep(ctx, o.settle)
	res.IdleKiB, _ = readRSS(o.pid)
	if res.IdleKiB == 0 {
		return nil, fmt.Errorf("cannot read the RSS of process %d", o.pid)
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex // guards the fields below
		clients  []*httpClient
		errCount int
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	var conns []*conn
	for range max(o.conns, 1) {
		c, err := newConn(u)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		wg.Go(func() {
			for next.Add(1) <= int64(o.sessions) {
				hc, err := newHTTPClient(ctx, c, false, "", []byte("{}"))
				mu.Lock()
				if err != nil {
					errCount++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					clients = append(clients, hc)
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	res.OpenS = time.Since(start).Seconds()
	defer func() {
		if o.keep {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, hc := range clients {
			hc.end(cctx)
		}
		for _, c := range conns {
			c.close()
		}
	}()
	if len(clients) == 0 && firstErr != nil {
		return nil, firstErr
	}
	sleep(ctx, o.settle)
	res.AfterKiB, _ = readRSS(o.pid)
	res.Sessions, res.Errors = len(clients), errCount
	if res.Sessions > 0 {
		res.PerSessionKiB = float64(res.AfterKiB-res.IdleKiB) / float64(res.Sessions)
	}
	return res, ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func printSessions(w io.Writer, r *sessionsResult) {
	fmt.Fprintf(w, "%s%s: %d idle legacy sessions (%d errors) opened in %.2fs\n", labelPrefix(r.Label), r.Target, r.Sessions, r.Errors, r.OpenS)
	fmt.Fprintf(w, "  RSS idle %.1f MiB, with the sessions %.1f MiB: %.1f KiB per session\n",
		float64(r.IdleKiB)/1024, float64(r.AfterKiB)/1024, r.PerSessionKiB)
}

func printStartup(w io.Writer, r *startupResult) {
	fmt.Fprintf(w, "%s%s (%s): median %.1f ms, min %.1f, max %.1f over %d runs\n",
		labelPrefix(r.Label), r.Target, r.Mode, r.MedianMS, r.MinMS, r.MaxMS, len(r.RunsMS))
}

func labelPrefix(l string) string {
	if l == "" {
		return ""
	}
	return l + ": "
}
