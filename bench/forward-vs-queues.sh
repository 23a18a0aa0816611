#!/usr/bin/env bash
# forward-vs-queues.sh: the cost of software forwarding, and of several
# queues per shard. The same httpd with two shards (--smp 2) serves on a
# one-queue veth pair (shard 0 owns the queue and hands shard 1 its flows
# over rings: --rss auto forwards) and on a two-queue pair (one queue each),
# and, as what one queue does without forwarding, with one shard on the
# one-queue pair; with one shard on the two-queue pair (--rss queues: the
# shard polls both queues) against one shard on one queue, what a second
# queue costs a shard. The same wrk, keep-alive and pipelined x16. Rounds
# interleave the setups; the table gives medians of req/s, whole-machine
# CPU-µs per request and the server's own CPU-µs per request, with the
# ratios to the first setup; then the forwarding counters of the last
# forwarding run (frames copied into the rings), and for the one-shard
# setups the data path's calls per request (last run). CPU 0 and CPU 1 are
# each CPU's busy time per request (shard 0 owns the one queue and sends
# every shard's frames: in copy mode the kernel's transmit, one skb a frame,
# runs in its sendto, on CPU 0; one shard runs on CPU 1).
#
#   sudo bench/forward-vs-queues.sh
#   sudo ROUNDS=5 DURATION=5s bench/forward-vs-queues.sh
#   sudo SETUPS="1:1 2:1" bench/forward-vs-queues.sh   # queues per shard only
#
# SETUPS lists QUEUES:SHARDS pairs [2:2 1:2 1:1 2:1]; ratios are to the first.
#
# Lab: namespaces named with this script's pid, two veth pairs (198.19.x.0/24
# each, removed on exit), the client ends' tx offloads off and
# net.core.txrehash=0 (a flow keeps its queue). The shards run on CPUs 0
# and 1, wrk where the scheduler puts it.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}
SETUPS=${SETUPS:-2:2 1:2 1:1 2:1}

cd "$(dirname "$0")/.."
source bench/lib.sh
need_root forward-vs-queues "namespaces, XDP, AF_XDP"
need_tools forward-vs-queues "apt-get install wrk iproute2 ethtool curl" wrk ip ethtool curl go

id=$$
srv=pcfq${id}-srv cli=pcfq${id}-cli
dir=$(mktemp -d /tmp/percore-fq.XXXXXX)
clean_on_exit "$dir"

go build -o "$dir/httpd" ./cmd/httpd

ip netns add "$srv"
namespaces+=("$srv")
ip netns add "$cli"
namespaces+=("$cli")
ip -n "$srv" link set lo up
ip -n "$cli" link set lo up
# pair QUEUES: a veth pair with QUEUES queues each way; the server end
# answers .1 natively, the client end holds .2.
declare -A ifs nets
pair() {
	local q=$1 vs=pcfq${id}s$1 vc=pcfq${id}c$1 net=198.19.$(((id + $1) % 200 + 20))
	ip link add "$vs" numtxqueues "$q" numrxqueues "$q" netns "$srv" type veth peer name "$vc" numtxqueues "$q" numrxqueues "$q" netns "$cli"
	ip -n "$srv" link set "$vs" up
	ip -n "$cli" link set "$vc" up
	ip -n "$cli" addr add "$net.2/24" dev "$vc"
	ip netns exec "$cli" ethtool -K "$vc" tx off tso off gso off >/dev/null
	ifs[$q]=$vs nets[$q]=$net
}
pair 1
pair 2
ip netns exec "$cli" sysctl -qw net.core.txrehash=0
in_cli() { ip netns exec "$cli" "$@"; }

# serve QUEUES SHARDS: httpd --smp SHARDS on the pair with QUEUES queues
# (on pids); sets pid, url.
serve() {
	local cpus=0,1 rss=auto
	[[ $2 == 2 ]] || cpus=1
	((${1} <= ${2})) || rss=queues
	ip netns exec "$srv" "$dir/httpd" --network-stack native --iface "${ifs[$1]}" --host-ipv4-addr "${nets[$1]}.1" \
		--smp "$2" --cpuset "$cpus" --rss "$rss" --port 8080 --stats-interval 0 --prometheus-port 9180 2>>"$dir/q$1.log" &
	pid=$!
	pids+=("$pid")
	url=http://${nets[$1]}.1:8080/
	for _ in $(seq 100); do
		in_cli curl -fs --max-time 1 "$url" >/dev/null && return 0
		sleep 0.1
	done
	echo "forward-vs-queues: $1 queue(s) did not answer at $url" >&2
	cat "$dir/q$1.log" >&2
	exit 1
}


# cpubusy N: busy jiffies of CPU N so far (as busy, for one CPU).
cpubusy() { awk -v c="cpu$1" '$1 == c {print $2+$3+$4+$7+$8; exit}' /proc/stat; }

# one QUEUES SHARDS LOAD: one wrk measurement.
declare -A rps cpu own cpu0 cpu1
one() {
	local key="$1 $2 $3" hz b0 b1 p0 p1 c00 c01 c10 c11 out reqs rate us sus load=$3
	local args=(-t"$THREADS" -c"$CONNS")
	[[ $load == x1 ]] || args+=(-s bench/wrk-pipeline.lua)
	serve "$1" "$2"
	hz=$(getconf CLK_TCK)
	in_cli wrk "${args[@]}" -d1s "$url" -- "${load#x}" >/dev/null
	b0=$(busy) c00=$(cpubusy 0) c10=$(cpubusy 1)
	p0=$(proccpu "$pid")
	out=$(in_cli wrk "${args[@]}" -d"$DURATION" "$url" -- "${load#x}")
	b1=$(busy) c01=$(cpubusy 0) c11=$(cpubusy 1)
	p1=$(proccpu "$pid")
	ip netns exec "$srv" curl -fs --max-time 2 http://127.0.0.1:9180/metrics >"$dir/metrics-$1$2-$load" 2>/dev/null || true
	stop_pids
	reqs=$(awk '/requests in/{print $1}' <<<"$out")
	rate=$(awk '/Requests\/sec/{print $2}' <<<"$out")
	us=$(awk -v b="$((b1 - b0))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.2f", b*1e6/hz/n}')
	sus=$(awk -v b="$((p1 - p0))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.2f", b*1e6/hz/n}')
	awk '/Non-2xx|Socket errors/' <<<"$out" | sed "s/^/forward-vs-queues: $key: /" >&2
	rps[$key]+="$rate "
	cpu[$key]+="$us "
	own[$key]+="$sus "
	cpu0[$key]+="$(awk -v b="$((c01 - c00))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.2f", b*1e6/hz/n}') "
	cpu1[$key]+="$(awk -v b="$((c11 - c10))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.2f", b*1e6/hz/n}') "
	echo "round $r: $1 queue(s), $2 shard(s), $load: $rate req/s, $us CPU-µs/req (server $sus)" >&2
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
	for load in x1 x16; do
		for setup in $SETUPS; do
			one "${setup%:*}" "${setup#*:}" "$load"
		done
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
echo
echo "load average before the run: $load0; $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + work tree')"
name() { sed 's/^2 2$/2 queues, --smp 2/; s/^1 2$/1 queue, --smp 2 (forward)/; s/^1 1$/1 queue, --smp 1/; s/^2 1$/2 queues, --smp 1 (--rss queues)/' <<<"$1"; }
base=${SETUPS%% *} base=${base/:/ }
echo "wrk -t$THREADS -c$CONNS -d$DURATION from the client namespace, GET / (5 bytes), $ROUNDS interleaved rounds, medians; ratios to $(name "$base")"
echo
echo "| load | setup | req/s | ratio | CPU-µs/req | ratio | server CPU-µs/req | ratio | CPU 0 µs/req | CPU 1 µs/req |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for load in x1 x16; do
	label="c$CONNS"
	[[ $load == x1 ]] || label+=" pipelined $load"
	rq=$(median <<<"${rps[$base $load]}") cq=$(median <<<"${cpu[$base $load]}") oq=$(median <<<"${own[$base $load]}")
	for setup in $SETUPS; do
		setup=${setup/:/ }
		r1=$(median <<<"${rps[$setup $load]}") c1=$(median <<<"${cpu[$setup $load]}") o1=$(median <<<"${own[$setup $load]}")
		printf '| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$(name "$setup")" "$r1" "$(ratio "$r1" "$rq")" \
			"$c1" "$(ratio "$c1" "$cq")" "$o1" "$(ratio "$o1" "$oq")" \
			"$(median <<<"${cpu0[$setup $load]}")" "$(median <<<"${cpu1[$setup $load]}")"
	done
done
for load in x1 x16; do
	[[ -s $dir/metrics-12-$load ]] || continue
	echo
	echo "forwarding counters, last forwarding $load run (cumulative since start, warm-up included):"
	grep -E '^percore_native_fwd_|^percore_http_requests' "$dir/metrics-12-$load" | grep -v '^#' || true
done
# Where a second queue's cost goes: the data path's calls per request in
# the last run of each one-shard setup (counters summed over queues).
calls='xsk_rx_batches|xsk_rx_frames|xsk_tx_batches|xsk_kicks|xsk_rx_wakeups|native_wakeups|ip_polls'
for load in x1 x16; do
	for setup in 1:1 2:1; do
		f=$dir/metrics-${setup/:/}-$load
		[[ -s $f ]] || continue
		echo
		echo "$(name "${setup/:/ }"), $load, last run, per request (warm-up included):"
		awk -v re="^percore_($calls)_total" '
			/^percore_http_requests_total/ {req += $NF}
			$1 ~ re {split($1, n, "{"); v[n[1]] += $NF}
			END {for (k in v) printf "  %s %.3f\n", k, v[k] / req}' "$f" | sort
	done
done
