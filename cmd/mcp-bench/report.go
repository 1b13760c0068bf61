package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// report summarises the JSON lines of load, startup and sessions runs:
// the median of each measure over the runs of a label, and for a label
// "group/name" its ratio to "group/direct" at the same concurrency,
// computed run by run (the runs with the same -run number were measured
// back to back) and then taken at the median.
func report(in io.Reader, w io.Writer) error {
	type key struct {
		label string
		c     int
	}
	var (
		loads    = map[key][]*loadResult{}
		loadKeys []key
		starts   = map[string][]float64{}
		startIDs []string
		sessions []*sessionsResult
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] != '{' {
			continue
		}
		var kind struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(line), &kind); err != nil {
			return err
		}
		switch kind.Kind {
		case "load":
			var r loadResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return err
			}
			k := key{r.Label, r.Concurrency}
			if _, ok := loads[k]; !ok {
				loadKeys = append(loadKeys, k)
			}
			loads[k] = append(loads[k], &r)
		case "startup":
			var r startupResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return err
			}
			if _, ok := starts[r.Label]; !ok {
				startIDs = append(startIDs, r.Label)
			}
			starts[r.Label] = append(starts[r.Label], r.RunsMS...)
		case "sessions":
			var r sessionsResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return err
			}
			sessions = append(sessions, &r)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}

	if len(loadKeys) > 0 {
		fmt.Fprintln(w, "Load (medians over runs; latency in µs; CPU per call sums the -pid processes):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "label\tclients\truns\tp50\tp90\tp99\tcalls/s\tserver µs CPU/call\tserver CPU\tload tool CPU\terrors\t")
		for _, k := range loadKeys {
			rs := loads[k]
			errs := 0
			for _, r := range rs {
				errs += r.Errors + r.ToolErrors
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%s\t%s\t%.0f%%\t%d\t\n", k.label, k.c, len(rs),
				med(rs, func(r *loadResult) float64 { return r.LatencyUS.P50 }),
				med(rs, func(r *loadResult) float64 { return r.LatencyUS.P90 }),
				med(rs, func(r *loadResult) float64 { return r.LatencyUS.P99 }),
				med(rs, func(r *loadResult) float64 { return r.Throughput }),
				serverMed(rs, func(s *procStats) float64 { return s.CPUPerCallUS }, "%.1f"),
				serverMed(rs, func(s *procStats) float64 { return 100 * s.CPU }, "%.0f%%"),
				100*med(rs, func(r *loadResult) float64 { return r.ClientCPU }),
				errs)
		}
		_ = tw.Flush()

		fmt.Fprintln(w)
		fmt.Fprintln(w, "Ratios to group/direct (per run, then the median; the range is min..max over runs):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "label\tclients\tp50 ratio\tp99 ratio\tthroughput ratio\t")
		for _, k := range loadKeys {
			group, name, ok := strings.Cut(k.label, "/")
			if !ok || name == "direct" {
				continue
			}
			base := loads[key{group + "/direct", k.c}]
			if base == nil {
				continue
			}
			byRun := map[int]*loadResult{}
			for _, b := range base {
				byRun[b.Run] = b
			}
			var p50, p99, thr []float64
			for _, r := range loads[k] {
				b := byRun[r.Run]
				if b == nil || b.LatencyUS.P50 == 0 || b.Throughput == 0 {
					continue
				}
				p50 = append(p50, r.LatencyUS.P50/b.LatencyUS.P50)
				p99 = append(p99, r.LatencyUS.P99/b.LatencyUS.P99)
				thr = append(thr, r.Throughput/b.Throughput)
			}
			if len(p50) == 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", k.label, k.c, ratio(p50), ratio(p99), ratio(thr))
		}
		_ = tw.Flush()

		// Scaling: the throughput at the most clients over that at one,
		// per run, for labels measured at both.
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Scaling (throughput at the most clients / at 1 client, per run, then the median):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "label\tclients\tthroughput gain\t")
		done := map[string]bool{}
		for _, k := range loadKeys {
			if done[k.label] {
				continue
			}
			done[k.label] = true
			most := 1
			for _, k2 := range loadKeys {
				if k2.label == k.label && k2.c > most {
					most = k2.c
				}
			}
			one, many := loads[key{k.label, 1}], loads[key{k.label, most}]
			if most == 1 || one == nil {
				continue
			}
			byRun := map[int]*loadResult{}
			for _, r := range one {
				byRun[r.Run] = r
			}
			var gains []float64
			for _, r := range many {
				if b := byRun[r.Run]; b != nil && b.Throughput > 0 {
					gains = append(gains, r.Throughput/b.Throughput)
				}
			}
			if len(gains) > 0 {
				fmt.Fprintf(tw, "%s\t1 -> %d\t%s\t\n", k.label, most, ratio(gains))
			}
		}
		_ = tw.Flush()
	}

	if len(startIDs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Start-up (ms from process start to ready; ratio to group/direct's median):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "label\truns\tmedian\tmin\tmax\tratio\t")
		for _, id := range startIDs {
			runs := slices.Sorted(slices.Values(starts[id]))
			r := ""
			if group, name, ok := strings.Cut(id, "/"); ok && name != "direct" {
				if base := starts[group+"/direct"]; len(base) > 0 {
					r = fmt.Sprintf("%.2fx", median(runs)/median(slices.Sorted(slices.Values(base))))
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t\n", id, len(runs), median(runs), runs[0], runs[len(runs)-1], r)
		}
		_ = tw.Flush()
	}

	if len(sessions) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Memory:")
		for _, s := range sessions {
			printSessions(w, s)
		}
	}
	return nil
}

func med(rs []*loadResult, f func(*loadResult) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	return median(vs)
}

// serverMed formats the median of a server measure, or "-" when no run
// had -pid.
func serverMed(rs []*loadResult, f func(*procStats) float64, format string) string {
	var vs []float64
	for _, r := range rs {
		if r.Server != nil {
			vs = append(vs, f(r.Server))
		}
	}
	if len(vs) == 0 {
		return "-"
	}
	slices.Sort(vs)
	return fmt.Sprintf(format, median(vs))
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ratio(vs []float64) string {
	slices.Sort(vs)
	return fmt.Sprintf("%.2fx (%.2f..%.2f)", median(vs), vs[0], vs[len(vs)-1])
}
