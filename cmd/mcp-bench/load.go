package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// loadOptions are the settings of one load run.
type loadOptions struct {
	url     string   // a Streamable HTTP endpoint, or
	argv    []string // a stdio server to launch
	modern  bool
	tool    string
	args    json.RawMessage
	calls   int // measured calls, over all clients
	clients int
	warmup  int // calls before the measurement, over all clients
	timeout time.Duration
	pids    []int // server processes to report on; the stdio child by default
	label   string
	run     int
}

// loadResult is the JSON output of a load run.
type loadResult struct {
	Kind        string  `json:"kind"` // "load"
	Label       string  `json:"label,omitempty"`
	Run         int     `json:"run,omitempty"`
	Target      string  `json:"target"`
	Era         string  `json:"era"`
	Tool        string  `json:"tool"`
	Concurrency int     `json:"concurrency"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	ToolErrors  int     `json:"tool_errors"`
	FirstError  string  `json:"first_error,omitempty"`
	DurationS   float64 `json:"duration_s"`
	Throughput  float64 `json:"throughput_rps"`
	// ResultBytes is the mean size of a result.
	ResultBytes int64     `json:"result_bytes"`
	LatencyUS   latencies `json:"latency_us"`
	// ClientCPU is the CPU time the load tool used, as a fraction of
	// one core over the run: near 1 (or near its GOMAXPROCS) means the
	// tool itself may be the bottleneck.
	ClientCPU float64 `json:"client_cpu"`
	// Server sums the processes named with -pid (or the stdio child).
	Server *procStats `json:"server,omitempty"`
}

type latencies struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// procStats describes server processes over a run.
type procStats struct {
	PIDs []int `json:"pids"`
	// RSSKiB is the resident set after the run; PeakKiB the high-water
	// mark (VmHWM) of the process's whole life.
	RSSKiB  int64 `json:"rss_kib"`
	PeakKiB int64 `json:"peak_kib"`
	// CPU is the processes' CPU time during the run as a fraction of one
	// core; CPUPerCallUS the CPU time per measured call.
	CPU          float64 `json:"cpu"`
	CPUPerCallUS float64 `json:"cpu_per_call_us"`
}

// caller makes calls as one client; it returns the result's size and
// whether it is a tool error.
type caller interface {
	call(ctx context.Context) (int, bool, error)
}

func runLoad(ctx context.Context, o loadOptions) (*loadResult, error) {
	if o.clients < 1 || o.calls < 1 {
		return nil, errors.New("-n and -c must be at least 1")
	}
	var (
		callers []caller
		cleanup []func()
		target  string
	)
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	switch {
	case o.url != "":
		u, err := url.Parse(o.url)
		if err != nil {
			return nil, err
		}
		target = o.url
		for range o.clients {
			c, err := newConn(u)
			if err != nil {
				return nil, err
			}
			cleanup = append(cleanup, c.close)
			hc, err := newHTTPClient(ctx, c, o.modern, o.tool, o.args)
			if err != nil {
				return nil, err
			}
			cleanup = append(cleanup, func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				hc.end(cctx)
			})
			callers = append(callers, hc)
		}
	case len(o.argv) > 0:
		s, err := startStdio(ctx, o.argv, o.modern, o.tool, o.args)
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, s.close)
		target = strings.Join(o.argv, " ")
		if len(o.pids) == 0 {
			o.pids = []int{s.pid()}
		}
		for range o.clients {
			callers = append(callers, s.client())
		}
	default:
		return nil, errors.New("give -url, or a stdio command after --")
	}

	res := &loadResult{Kind: "load", Label: o.label, Run: o.run, Target: target, Era: era(o.modern), Tool: o.tool, Concurrency: o.clients}
	var (
		next       atomic.Int64 // calls handed out
		mu         sync.Mutex   // guards the fields below
		all        []time.Duration
		errs, tErr int
		bytes      int64
		firstErr   error
	)
	// Warm up: connections, caches, the servers' heaps.
	next.Store(int64(o.calls) - int64(o.warmup))
	work := func(record bool) {
		var wg sync.WaitGroup
		for _, cl := range callers {
			wg.Go(func() {
				lat := make([]time.Duration, 0, o.calls/o.clients+1)
				var e, te int
				var b int64
				var first error
				for next.Add(1) <= int64(o.calls) {
					cctx, cancel := ctx, context.CancelFunc(func() {})
					if o.timeout > 0 {
						cctx, cancel = context.WithTimeout(ctx, o.timeout)
					}
					t0 := time.Now()
					n, isErr, err := cl.call(cctx)
					d := time.Since(t0)
					cancel()
					switch {
					case err != nil:
						e++
						if first == nil {
							first = err
						}
						if ctx.Err() != nil {
							return
						}
					case isErr:
						te++
					}
					b += int64(n)
					lat = append(lat, d)
				}
				if !record {
					return
				}
				mu.Lock()
				all = append(all, lat...)
				errs += e
				tErr += te
				bytes += b
				if firstErr == nil {
					firstErr = first
				}
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	if o.warmup > 0 {
		work(false)
	}
	next.Store(0)
	before := readProcs(o.pids)
	cpu0 := selfCPU()
	start := time.Now()
	work(true)
	wall := time.Since(start)
	cpu1 := selfCPU()
	after := readProcs(o.pids)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	res.Calls = len(all)
	res.Errors, res.ToolErrors = errs, tErr
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	res.DurationS = wall.Seconds()
	res.Throughput = float64(res.Calls-errs) / wall.Seconds()
	if res.Calls > 0 {
		res.ResultBytes = bytes / int64(res.Calls)
	}
	res.LatencyUS = summarize(all)
	res.ClientCPU = (cpu1 - cpu0).Seconds() / wall.Seconds()
	if len(o.pids) > 0 {
		res.Server = &after.procStats
		res.Server.CPU = (after.cpu - before.cpu).Seconds() / wall.Seconds()
		if res.Calls > 0 {
			res.Server.CPUPerCallUS = float64((after.cpu - before.cpu).Microseconds()) / float64(res.Calls)
		}
	}
	return res, nil
}

func era(modern bool) string {
	if modern {
		return "modern"
	}
	return "legacy"
}

// summarize returns the percentiles of ds in microseconds (nearest rank).
func summarize(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return us(ds[max(i, 0)])
	}
	return latencies{P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: us(ds[len(ds)-1]), Mean: us(sum / time.Duration(len(ds)))}
}

func us(d time.Duration) float64 { return math.Round(float64(d.Nanoseconds())/100) / 10 }

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procSample is procStats with the raw CPU time.
type procSample struct {
	procStats
	cpu time.Duration
}

// readProcs sums the memory and CPU time of processes from /proc (Linux);
// nil when pids is empty.
func readProcs(pids []int) *procSample {
	if len(pids) == 0 {
		return nil
	}
	s := &procSample{procStats: procStats{PIDs: pids}}
	for _, pid := range pids {
		rss, hwm := readRSS(pid)
		s.RSSKiB += rss
		s.PeakKiB += hwm
		s.cpu += readCPU(pid)
	}
	return s
}

// readRSS returns VmRSS and VmHWM of a process in KiB; 0 when unknown.
func readRSS(pid int) (rss, hwm int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// readCPU returns the user and system time a process has used.
func readCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; it ends at the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	// Fields 14 and 15 (utime, stime) are the 12th and 13th after ')'.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * clockTick
}

// printLoad writes a result as a table.
func printLoad(w io.Writer, r *loadResult) {
	label := ""
	if r.Label != "" {
		label = r.Label + ": "
	}
	fmt.Fprintf(w, "%s%s (%s, tool %s)\n", label, r.Target, r.Era, r.Tool)
	fmt.Fprintf(w, "  clients     %d\n", r.Concurrency)
	fmt.Fprintf(w, "  calls       %d (%d errors, %d tool errors), %d B results\n", r.Calls, r.Errors, r.ToolErrors, r.ResultBytes)
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error %s\n", r.FirstError)
	}
	fmt.Fprintf(w, "  duration    %.3fs\n", r.DurationS)
	fmt.Fprintf(w, "  throughput  %.0f calls/s\n", r.Throughput)
	l := r.LatencyUS
	fmt.Fprintf(w, "  latency µs  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f\n", l.P50, l.P90, l.P99, l.Max, l.Mean)
	fmt.Fprintf(w, "  load tool   %.0f%% of a core\n", 100*r.ClientCPU)
	if s := r.Server; s != nil {
		fmt.Fprintf(w, "  server      pids %v: RSS %.1f MiB (peak %.1f MiB), %.0f%% of a core, %.1f µs CPU per call\n",
			s.PIDs, float64(s.RSSKiB)/1024, float64(s.PeakKiB)/1024, 100*s.CPU, s.CPUPerCallUS)
	}
}
