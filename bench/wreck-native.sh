#!/usr/bin/env bash
# wreck-native.sh: three clients against percore's native httpd on a veth lab:
# wreck on the native stack (AF_XDP queue + userspace TCP per client shard),
# wreck on kernel sockets, and wrk. The server is `httpd --network-stack native
# --lab --smp SMP` (it builds the lab, the server end in the root namespace);
# every client runs in the lab's client namespace with SMP shards / threads,
# keep-alive, CONNS connections, for DUR seconds, interleaved for ROUNDS
# rounds. Prints medians (min-max) of requests/s and of CPU-us per request:
# whole-machine busy time (/proc/stat user+nice+system+irq+softirq+steal,
# delta over the run, divided by the requests the client counted), and the
# client's and the server's own CPU time (steadier when other work shares the
# machine).
#
#   sudo bench/wreck-native.sh                  # 3 rounds, --smp 2, -c64, 5s
#   sudo ROUNDS=5 CONNS=128 DUR=10 bench/wreck-native.sh
#   sudo PIPELINE=16 bench/wreck-native.sh     # wrk pipelines through bench/wrk-pipeline.lua
#   sudo BASE=main bench/wreck-native.sh       # also native wreck as of git revision BASE, as "base"
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
DUR=${DUR:-5}
SMP=${SMP:-2}
PORT=${PORT:-18100}
PIPELINE=${PIPELINE:-1}
BASE=${BASE:-}

root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
need_root wreck-native "lab, XDP, AF_XDP: run with sudo"
need_tools wreck-native "apt-get install -y wrk iproute2 time" wrk ip go /usr/bin/time

tmp=$(mktemp -d /tmp/wreck-native.XXXXXX)
clean_on_exit "$tmp"

(cd "$root" && go build -o "$tmp/httpd" ./cmd/httpd && go build -o "$tmp/wreck" ./cmd/wreck)
clients=(native kernel wrk)
if [[ -n $BASE ]]; then
	mkdir "$tmp/base-src"
	git -C "$root" archive "$BASE" | tar -x -C "$tmp/base-src"
	(cd "$tmp/base-src" && go build -o "$tmp/base" ./cmd/wreck)
	clients+=(base)
fi

"$tmp/httpd" --network-stack native --lab --smp "$SMP" --port "$PORT" --stats-interval 0 >"$tmp/httpd.out" 2>"$tmp/httpd.err" &
httpd_pid=$!
pids+=("$httpd_pid")
for _ in $(seq 100); do
	grep -q '^lab: ' "$tmp/httpd.out" 2>/dev/null && break
	kill -0 "$httpd_pid" 2>/dev/null || { echo "wreck-native: httpd did not start: $(cat "$tmp/httpd.err")" >&2; exit 1; }
	sleep 0.1
done
# lab ID: server IF (ns root, SERVER_IP, MAC) <-> client IF (ns NS, CLIENT_IP, MAC), ...
read -r server_ip client_if client_ns < <(sed -n 's/^lab: [^:]*: server [^ ]* (ns [^,]*, \([0-9.]*\), [^)]*) <-> client \([^ ]*\) (ns \([^,]*\),.*/\1 \2 \3/p' "$tmp/httpd.out")
[[ -n ${client_ns:-} ]] || { echo "wreck-native: cannot read the lab from httpd's output: $(cat "$tmp/httpd.out")" >&2; exit 1; }
native_ip=${server_ip%.*}.3 # lab.NativePair's native client address: on no kernel interface
target=$server_ip:$PORT
in_ns() { /usr/bin/time -f '%U %S' -o "$tmp/time" ip netns exec "$client_ns" "$@"; } # the client's CPU time into $tmp/time

wrk_args=() wrk_script_args=()
if ((PIPELINE > 1)); then
	wrk_args=(-s "$root/bench/wrk-pipeline.lua")
	wrk_script_args=(-- "$PIPELINE")
fi

hz=$(getconf CLK_TCK)
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; } # utime + stime

run() { # client round -> appends "client rps machine_us client_us server_us" to results
	local tool=$1 out=$tmp/out b0 b1 s0 s1 reqs rps ut st
	b0=$(busy)
	s0=$(ticks "$httpd_pid")
	case $tool in
	native | base) in_ns "$tmp/${tool/native/wreck}" --network-stack native --iface "$client_if" --host-ipv4-addr "$native_ip" \
		--server "$target" --smp "$SMP" --conn "$CONNS" --pipeline "$PIPELINE" --duration "${DUR}s" >"$out" 2>"$tmp/err" ;;
	kernel) in_ns "$tmp/wreck" --server "$target" --smp "$SMP" --conn "$CONNS" --pipeline "$PIPELINE" --duration "${DUR}s" >"$out" 2>"$tmp/err" ;;
	wrk) in_ns wrk -t"$SMP" -c"$CONNS" -d"${DUR}s" "${wrk_args[@]}" "http://$target/" "${wrk_script_args[@]}" >"$out" 2>"$tmp/err" ;;
	esac
	b1=$(busy)
	s1=$(ticks "$httpd_pid")
	read -r ut st <"$tmp/time"
	reqs=$(awk '/requests in/{print $1; exit}' "$out")
	if [[ $tool != wrk ]]; then
		grep -q 'errors: non2xx 0, malformed 0 (oversized 0), timeout 0, reset 0, closed 0, connect 0, mismatch 0' "$out" ||
			echo "wreck-native: $tool round $2 had errors: $(grep errors: "$out")" >&2
	fi
	rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
	[[ -n $reqs && $reqs != 0 ]] || { echo "wreck-native: $tool completed no requests: $(cat "$out" "$tmp/err")" >&2; exit 1; }
	awk -v t="$tool" -v r="$rps" -v n="$reqs" -v db="$((b1 - b0))" -v ds="$((s1 - s0))" -v ut="$ut" -v st="$st" -v hz="$hz" \
		'BEGIN { printf "%s %.0f %.2f %.2f %.2f\n", t, r, db*1e6/hz/n, (ut+st)*1e6/n, ds/hz*1e6/n }' >>"$tmp/results"
	tail -1 "$tmp/results" | awk -v round="$2" '{ printf "round %d %-7s %9.0f req/s  CPU-us/req: %7.2f machine %6.2f client %6.2f server\n", round, $1, $2, $3, $4, $5 }' >&2
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
	for tool in "${clients[@]}"; do
		run "$tool" "$r"
	done
done

echo
echo "load average before/after: $load0 / $(cut -d' ' -f1-3 /proc/loadavg)"
echo "percore native httpd --smp $SMP (lab, $(nproc) CPUs) <- client with $SMP shards/threads, $CONNS connections, keep-alive, pipeline $PIPELINE, ${DUR}s x $ROUNDS rounds, interleaved; median (min-max)${BASE:+; base: native wreck at $(git -C "$root" rev-parse --short "$BASE")}"
echo
echo "| client | req/s | machine CPU-us/req | client CPU-us/req | server CPU-us/req |"
echo "|---|---|---|---|---|"
for tool in "${clients[@]}"; do
	for col in 2 3 4 5; do
		awk -v t="$tool" -v c="$col" '$1 == t { print $c }' "$tmp/results" | sort -g |
			awk -v c="$col" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; fmt = (c == 2) ? "%.0f (%.0f-%.0f)" : "%.2f (%.2f-%.2f)"; printf fmt "\n", m, v[1], v[NR] }' >"$tmp/col$col"
	done
	case $tool in
	native) name="wreck, native stack" ;;
	kernel) name="wreck, kernel sockets" ;;
	wrk) name="wrk -t$SMP" ;;
	base) name="wreck at $BASE, native stack" ;;
	esac
	printf '| %s | %s | %s | %s | %s |\n' "$name" "$(cat "$tmp/col2")" "$(cat "$tmp/col3")" "$(cat "$tmp/col4")" "$(cat "$tmp/col5")"
done
