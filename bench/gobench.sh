#!/usr/bin/env bash
# bench/gobench.sh: the hot path's Go benchmarks, COUNT times each, and
# the median of every figure (ns/op, B/op, allocs/op, alloc/result) per
# benchmark. Raw output: $OUT/gobench.txt (benchstat reads it too).
#
#   bench/gobench.sh                 # COUNT=5
#   COUNT=10 BENCHTIME=2s bench/gobench.sh
#
# The packages and what they cover:
#   internal/jsonrpc   decode, name lookup and rewrite, id remapping, isError scan, result writing
#   internal/router    Dispatch of tools/call (lookup, rewrite, progress token), metric recording
#   internal/server    the whole gateway in one process (PassThrough), SSE framing, replies
#   internal/upstream  the upstream clients: stdio, Streamable HTTP (JSON and SSE answers), pipelining
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-1s}
OUT=${OUT:-${TMPDIR:-/tmp}/mcp-gobench-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
RAW=$OUT/gobench.txt
: >"$RAW"

run() {
	go test -run '^$' -bench "$2" -benchmem -count "$COUNT" -benchtime "$BENCHTIME" "$1" | tee -a "$RAW" | grep -E '^(Benchmark|ok|FAIL)' >&2
}
run ./internal/jsonrpc '.'
run ./internal/router '.'
run ./internal/server '.'
run ./internal/upstream '.'

echo
echo "medians of $COUNT runs ($RAW):"
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++n] = name }
	for (i = 3; i < NF; i += 2) {
		unit = $(i + 1)
		if (unit == "MB/s") continue
		if (!((name, unit) in cnt)) { units[name] = units[name] " " unit }
		vals[name, unit, ++cnt[name, unit]] = $i
	}
}
function median(name, unit,    k, m, j, t, a) {
	m = cnt[name, unit]
	for (k = 1; k <= m; k++) a[k] = vals[name, unit, k] + 0
	for (k = 2; k <= m; k++) { t = a[k]; for (j = k - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	for (r = 1; r <= n; r++) {
		name = order[r]; line = name
		split(substr(units[name], 2), us, " ")
		for (u = 1; u in us; u++) {
			v = median(name, us[u])
			line = line sprintf((v >= 1000 ? "  %.0f %s" : "  %.4g %s"), v, us[u])
		}
		print line
	}
}' "$RAW" | tee "$OUT/medians.txt"
