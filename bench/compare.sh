#!/usr/bin/env bash
# bench/compare.sh: the gateway against the direct call, in one run.
#
# Starts a fast Go echo upstream (bench/echo) over Streamable HTTP and over
# stdio, then, RUNS times over, measures with cmd/mcp-bench at 1 and at 8
# concurrent clients:
#
#   http/direct           the HTTP echo server itself
#   http/proxy            the same through a bare reverse proxy (bench/proxy):
#                         the cost of one more HTTP hop through net/http
#   http/tcp-relay        the same through a TCP relay (bench/proxy -tcp) that
#                         copies bytes and reads no header: the floor of any
#                         proxy, whatever its HTTP stack
#   http/gateway-1        through the gateway, the echo server its only upstream
#   http/gateway-1-nometrics  the same with telemetry.metrics off
#   http/gateway-1-redis  gateway-1 with state.store redis (a redis-server the
#                         script starts, when there is one): what sharing
#                         sessions between replicas costs a legacy call
#   http/gateway-20       through a gateway with 19 more (stdio) upstreams
#   http-sse/...          an echo server that answers with SSE streams, as the
#                         SDK servers do by default, direct and through gateway-1
#   modern/...            the same echo, direct and through gateway-1 (and
#                         gateway-1-redis), with modern (2026-07-28)
#                         stateless requests
#   stdio/direct          the echo server over stdio, launched by mcp-bench
#   stdio/gateway         through a gateway whose only upstream is that server
#   stdio-1ms/...         the same with calls that take 1 ms each (concurrent in
#                         the server): throughput grows with clients only if
#                         the gateway pipelines calls on the one stdio pipe
#   blob/...              a 1 MiB tool result, direct and through gateway-1
#
# then start-up (20 stdio upstreams against the slowest one alone) and
# memory (RSS idle, and per idle legacy session over 1,000 sessions), and
# prints medians and the ratios to each group's direct run, computed run by
# run. Results: $OUT/results.jsonl, $OUT/report.txt.
#
# On a machine with 2 or more cores (PIN=1, the default) the load tool runs
# on CPU 1 and everything it measures (echo, proxy, gateways and their
# upstreams) on CPU 0, so that direct and gateway runs get the same CPU
# budget and the load tool never competes with what it measures.
#
# With BASE set to a git revision, that revision's gateway is built too and
# measured beside this one's, run by run, in the same configuration as
# gateway-1: http/gateway-1-base and modern/gateway-1-base (a before/after
# on the same machine, in the same run).
#
# Settings (environment): RUNS (5), N1 (calls at 1 client, 3000),
# N8 (calls at 8 clients, 12000), NSLOW (calls of 1 ms, 1000 at 1 client
# and 4 times as many at 8), NBLOB (1 MiB calls, 150), SESSIONS (1000),
# START_DELAY (the slowest upstream's start-up delay, 300ms), PIN (1),
# PORT (first of the ports used, 19100), OUT (results directory,
# $TMPDIR/mcp-bench-<time>), BASE (a git revision; none).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
N1=${N1:-3000}
N8=${N8:-12000}
NSLOW=${NSLOW:-1000}
NBLOB=${NBLOB:-150}
SESSIONS=${SESSIONS:-1000}
START_DELAY=${START_DELAY:-300ms}
BASE=${BASE:-}
PIN=${PIN:-1}
PORT=${PORT:-19100}
OUT=${OUT:-${TMPDIR:-/tmp}/mcp-bench-$(date -u +%Y%m%dT%H%M%SZ)}

mkdir -p "$OUT/bin" "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
BIN=$OUT/bin
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

echo "== building into $BIN"
go build -o "$BIN/" ./cmd/mcp-gateway ./cmd/mcp-bench ./bench/echo ./bench/proxy
if [[ -n $BASE ]]; then
	echo "== building the baseline gateway at $BASE"
	git worktree add --force --detach "$OUT/base-src" "$BASE" >/dev/null
	(cd "$OUT/base-src" && go build -o "$BIN/base/" ./cmd/mcp-gateway)
	git worktree remove --force "$OUT/base-src"
fi

LOAD=() SUT=()
if [[ $PIN == 1 ]] && command -v taskset >/dev/null && (($(nproc) >= 2)); then
	LOAD=(taskset -c 1)
	SUT=(taskset -c 0)
fi

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "go: $(go version)"
	echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "kernel: $(uname -sr)"
	echo "pinning: load tool ${LOAD[*]:-none}, servers ${SUT[*]:-none}"
	echo "settings: RUNS=$RUNS N1=$N1 N8=$N8 NSLOW=$NSLOW NBLOB=$NBLOB SESSIONS=$SESSIONS START_DELAY=$START_DELAY"
	[[ -z $BASE ]] || echo "baseline: $BASE ($(git rev-parse --short "$BASE"))"
} | tee "$OUT/env.txt"

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

# start NAME CMD...: runs a server in the background, output to logs/NAME.
start() {
	local name=$1
	shift
	"${SUT[@]}" "$@" >"$OUT/logs/$name.log" 2>&1 &
	PIDS+=($!)
	LAST_PID=$!
}

# wait_ready URL: waits until a gateway's /readyz says every upstream is
# ready.
wait_ready() {
	local body
	for _ in $(seq 1 500); do
		if body=$(curl -sf "$1" 2>/dev/null) && ! grep -o '"state":"[a-z_]*"' <<<"$body" | grep -qv '"ready"'; then
			return 0
		fi
		sleep 0.02
	done
	echo "not ready: $1" >&2
	return 1
}

# gateway_config FILE PORT METRICS UPSTREAMS: writes a gateway config.
gateway_config() {
	cat >"$1" <<EOF
listen: 127.0.0.1:$2
telemetry:
  metrics: $3
upstreams:
$4
EOF
}

echo_http="  - name: echo
    url: http://127.0.0.1:$PORT/mcp"
echo_sse="  - name: echo
    url: http://127.0.0.1:$((PORT + 7))/mcp"
echo_stdio="  - name: echo
    command: $BIN/echo
    args: [-stdio, -era, legacy]"
echo_slow="  - name: echo
    command: $BIN/echo
    args: [-stdio, -era, legacy, -call-delay, 1ms]"
others=""
for i in $(seq 1 19); do
	others+="
  - name: other$i
    command: $BIN/echo
    args: [-stdio, -era, legacy]"
done

P_PROXY=$((PORT + 1)) P_GW1=$((PORT + 2)) P_GW1N=$((PORT + 3)) P_GW20=$((PORT + 4)) P_GWS=$((PORT + 5)) P_MEM=$((PORT + 6))
P_SSE=$((PORT + 7)) P_GWSSE=$((PORT + 8)) P_GWSLOW=$((PORT + 9)) P_RELAY=$((PORT + 10)) P_BASE=$((PORT + 11))
gateway_config "$OUT/gw1.yaml" $P_GW1 true "$echo_http"
gateway_config "$OUT/gw1n.yaml" $P_GW1N false "$echo_http"
gateway_config "$OUT/gw20.yaml" $P_GW20 true "$echo_http$others"
gateway_config "$OUT/gws.yaml" $P_GWS true "$echo_stdio"
gateway_config "$OUT/gwsse.yaml" $P_GWSSE true "$echo_sse"
gateway_config "$OUT/gwslow.yaml" $P_GWSLOW true "$echo_slow"
gateway_config "$OUT/gwbase.yaml" $P_BASE true "$echo_http"
P_REDIS=$((PORT + 12)) P_GWREDIS=$((PORT + 13))
REDIS_SERVER=$(command -v redis-server || true)
if [[ -n $REDIS_SERVER ]]; then
	head -c 32 /dev/urandom | base64 >"$OUT/state.key"
	gateway_config "$OUT/gwredis.yaml" $P_GWREDIS true "$echo_http"
	cat >>"$OUT/gwredis.yaml" <<EOF
state:
  store: redis
  redis: {url: "redis://127.0.0.1:$P_REDIS/0"}
  key: {file: $OUT/state.key}
EOF
fi

echo "== starting the servers"
start echo "$BIN/echo" -listen 127.0.0.1:$PORT -era legacy
ECHO=$LAST_PID
start echo-sse "$BIN/echo" -listen 127.0.0.1:$P_SSE -era legacy -sse
ECHOSSE=$LAST_PID
start proxy "$BIN/proxy" -listen 127.0.0.1:$P_PROXY -to http://127.0.0.1:$PORT
PROXY=$LAST_PID
start relay "$BIN/proxy" -tcp -listen 127.0.0.1:$P_RELAY -to http://127.0.0.1:$PORT
RELAY=$LAST_PID
start gw1 "$BIN/mcp-gateway" --config "$OUT/gw1.yaml"
GW1=$LAST_PID
start gw1n "$BIN/mcp-gateway" --config "$OUT/gw1n.yaml"
GW1N=$LAST_PID
start gw20 "$BIN/mcp-gateway" --config "$OUT/gw20.yaml"
GW20=$LAST_PID
start gws "$BIN/mcp-gateway" --config "$OUT/gws.yaml"
GWS=$LAST_PID
start gwsse "$BIN/mcp-gateway" --config "$OUT/gwsse.yaml"
GWSSE=$LAST_PID
start gwslow "$BIN/mcp-gateway" --config "$OUT/gwslow.yaml"
GWSLOW=$LAST_PID
ready_ports="$P_GW1 $P_GW1N $P_GW20 $P_GWS $P_GWSSE $P_GWSLOW"
if [[ -n $REDIS_SERVER ]]; then
	start redis "$REDIS_SERVER" --port $P_REDIS --bind 127.0.0.1 --save "" --appendonly no --dir "$OUT"
	for _ in $(seq 1 250); do (echo PING >/dev/tcp/127.0.0.1/$P_REDIS) 2>/dev/null && break; sleep 0.02; done
	start gwredis "$BIN/mcp-gateway" --config "$OUT/gwredis.yaml"
	GWREDIS=$LAST_PID
	ready_ports+=" $P_GWREDIS"
else
	echo "== no redis-server: http/gateway-1-redis is not measured" >&2
fi
if [[ -n $BASE ]]; then
	start gwbase "$BIN/base/mcp-gateway" --config "$OUT/gwbase.yaml"
	GWBASE=$LAST_PID
	ready_ports+=" $P_BASE"
fi
for p in $ready_ports; do wait_ready "http://127.0.0.1:$p/readyz"; done
GWS_CHILD=$(pgrep -P "$GWS" | head -1)
GWSLOW_CHILD=$(pgrep -P "$GWSLOW" | head -1)

# load LABEL RUN CLIENTS CALLS ARGS...: one mcp-bench load run.
load() {
	local label=$1 run=$2 c=$3 n=$4
	shift 4
	"${LOAD[@]}" "$BIN/mcp-bench" load -label "$label" -run "$run" -c "$c" -n "$n" -format json "$@" >>"$RESULTS" ||
		echo "load $label (run $run, $c clients) had errors" >&2
}

for run in $(seq 1 "$RUNS"); do
	echo "== run $run of $RUNS"
	for c in 1 8; do
		n=$N1
		((c == 1)) || n=$N8
		load http/direct "$run" $c $n -url http://127.0.0.1:$PORT/mcp -pid $ECHO
		load http/proxy "$run" $c $n -url http://127.0.0.1:$P_PROXY/mcp -pid $PROXY,$ECHO
		load http/tcp-relay "$run" $c $n -url http://127.0.0.1:$P_RELAY/mcp -pid $RELAY,$ECHO
		load http/gateway-1 "$run" $c $n -url http://127.0.0.1:$P_GW1/mcp -tool echo__echo -pid $GW1,$ECHO
		[[ -z $BASE ]] || load http/gateway-1-base "$run" $c $n -url http://127.0.0.1:$P_BASE/mcp -tool echo__echo -pid $GWBASE,$ECHO
		load http/gateway-1-nometrics "$run" $c $n -url http://127.0.0.1:$P_GW1N/mcp -tool echo__echo -pid $GW1N,$ECHO
		[[ -z $REDIS_SERVER ]] || load http/gateway-1-redis "$run" $c $n -url http://127.0.0.1:$P_GWREDIS/mcp -tool echo__echo -pid $GWREDIS,$ECHO
		load http/gateway-20 "$run" $c $n -url http://127.0.0.1:$P_GW20/mcp -tool echo__echo -pid $GW20,$ECHO
		load http-sse/direct "$run" $c $n -url http://127.0.0.1:$P_SSE/mcp -pid $ECHOSSE
		load http-sse/gateway-1 "$run" $c $n -url http://127.0.0.1:$P_GWSSE/mcp -tool echo__echo -pid $GWSSE,$ECHOSSE
		load modern/direct "$run" $c $n -era modern -url http://127.0.0.1:$PORT/mcp -pid $ECHO
		load modern/gateway-1 "$run" $c $n -era modern -url http://127.0.0.1:$P_GW1/mcp -tool echo__echo -pid $GW1,$ECHO
		[[ -z $BASE ]] || load modern/gateway-1-base "$run" $c $n -era modern -url http://127.0.0.1:$P_BASE/mcp -tool echo__echo -pid $GWBASE,$ECHO
		[[ -z $REDIS_SERVER ]] || load modern/gateway-1-redis "$run" $c $n -era modern -url http://127.0.0.1:$P_GWREDIS/mcp -tool echo__echo -pid $GWREDIS,$ECHO
		load stdio/direct "$run" $c $n -- "${SUT[@]}" "$BIN/echo" -stdio -era legacy
		load stdio/gateway "$run" $c $n -url http://127.0.0.1:$P_GWS/mcp -tool echo__echo -pid $GWS,$GWS_CHILD
		ns=$((NSLOW * (c == 1 ? 1 : 4)))
		load stdio-1ms/direct "$run" $c $ns -warmup 50 -- "${SUT[@]}" "$BIN/echo" -stdio -era legacy -call-delay 1ms
		load stdio-1ms/gateway "$run" $c $ns -warmup 50 -url http://127.0.0.1:$P_GWSLOW/mcp -tool echo__echo -pid $GWSLOW,$GWSLOW_CHILD
	done
	blob='{"size":1048576}'
	load blob/direct "$run" 1 "$NBLOB" -warmup 20 -url http://127.0.0.1:$PORT/mcp -tool blob -args "$blob" -pid $ECHO
	load blob/gateway-1 "$run" 1 "$NBLOB" -warmup 20 -url http://127.0.0.1:$P_GW1/mcp -tool echo__blob -args "$blob" -pid $GW1,$ECHO
done

echo "== start-up"
slow_config() { # slow_config FILE DELAY_OF_THE_LAST: 20 stdio upstreams, started with delays up to it
	local ups="" i ms
	ms=${2%ms}
	for i in $(seq 1 20); do
		ups+="
  - name: up$i
    command: $BIN/echo
    args: [-stdio, -era, legacy, -start-delay, $((ms * i / 20))ms]"
	done
	gateway_config "$1" $P_MEM true "$ups"
}
slow_config "$OUT/start20.yaml" "$START_DELAY"
slow_config "$OUT/start20-0.yaml" 0ms
"${LOAD[@]}" "$BIN/mcp-bench" startup -label startup/direct -runs "$RUNS" -format json -- "${SUT[@]}" "$BIN/echo" -stdio -era legacy -start-delay "$START_DELAY" >>"$RESULTS"
"${LOAD[@]}" "$BIN/mcp-bench" startup -label startup/gateway-20 -runs "$RUNS" -format json -ready http://127.0.0.1:$P_MEM/readyz -- "${SUT[@]}" "$BIN/mcp-gateway" --config "$OUT/start20.yaml" >>"$RESULTS"
"${LOAD[@]}" "$BIN/mcp-bench" startup -label startup-nodelay/direct -runs "$RUNS" -format json -- "${SUT[@]}" "$BIN/echo" -stdio -era legacy >>"$RESULTS"
"${LOAD[@]}" "$BIN/mcp-bench" startup -label startup-nodelay/gateway-20 -runs "$RUNS" -format json -ready http://127.0.0.1:$P_MEM/readyz -- "${SUT[@]}" "$BIN/mcp-gateway" --config "$OUT/start20-0.yaml" >>"$RESULTS"

echo "== memory"
for cfg in gw1 gw20; do
	sed "s/^listen: .*/listen: 127.0.0.1:$P_MEM/" "$OUT/$cfg.yaml" >"$OUT/mem-$cfg.yaml"
	start "mem-$cfg" "$BIN/mcp-gateway" --config "$OUT/mem-$cfg.yaml"
	mem=$LAST_PID
	wait_ready "http://127.0.0.1:$P_MEM/readyz"
	"${LOAD[@]}" "$BIN/mcp-bench" sessions -label "memory/$cfg" -url http://127.0.0.1:$P_MEM/mcp -n "$SESSIONS" -pid $mem -format json >>"$RESULTS"
	kill $mem
	wait $mem 2>/dev/null || true
done

echo
"$BIN/mcp-bench" report "$RESULTS" | tee "$OUT/report.txt"
