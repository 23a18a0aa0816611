#!/usr/bin/env bash
# before-after.sh: requests/s and whole-machine CPU-µs per request of the
# httpd built at BASE (a commit) against the httpd of the work tree, on the
# native stack and on the posix stack, keep-alive and pipelined x16, driven
# by the same wrk. Each measurement starts its server alone, so the two
# builds never run at once; the order is interleaved (base, new, base, new
# ...) and the table gives medians over the rounds and the new/base ratio.
#
#   sudo BASE=67a4edb bench/before-after.sh
#   sudo BASE=67a4edb ROUNDS=5 DURATION=5s bench/before-after.sh
#
# The lab is native-vs-posix.sh's: a one-queue veth pair between a server and
# a client namespace (198.18.0.0/15, names with this script's pid, removed on
# exit), the kernel address .3 for posix, .1 answered by the native stack.
# Server on CPU 1 (one shard), wrk on CPU 0.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

BASE=${BASE:?set BASE to the commit to compare against}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}

cd "$(dirname "$0")/.."
source bench/lib.sh
need_root before-after "namespaces, XDP, AF_XDP"
need_tools before-after "apt-get install wrk iproute2 ethtool curl" wrk taskset ip ethtool curl go git

id=$$
srv=pcba${id}-srv cli=pcba${id}-cli
vs=pcba${id}s vc=pcba${id}c
net=198.19.$((id % 200 + 20))
native_ip=$net.1 client_ip=$net.2 kernel_ip=$net.3
dir=$(mktemp -d /tmp/percore-ba.XXXXXX)
clean_on_exit "$dir"

build_httpd_at "$BASE" "$dir/httpd-base"
go build -o "$dir/httpd-new" ./cmd/httpd

one_queue_lab
in_cli() { ip netns exec "$cli" "$@"; }

# serve BUILD STACK: start that httpd alone on CPU 1 (on pids); sets url.
serve() {
	local bin=$dir/httpd-$1
	if [[ $2 == native ]]; then
		ip netns exec "$srv" taskset -c 1 "$bin" --network-stack native --iface "$vs" --host-ipv4-addr "$native_ip" \
			--smp 1 --cpuset 1 --port 8080 --stats-interval 0 2>>"$dir/$1-$2.log" &
		url=http://$native_ip:8080/
	else
		ip netns exec "$srv" taskset -c 1 "$bin" --smp 1 --cpuset 1 --address "$kernel_ip" --port 8081 \
			--stats-interval 0 2>>"$dir/$1-$2.log" &
		url=http://$kernel_ip:8081/
	fi
	pids+=($!)
	for _ in $(seq 100); do
		in_cli curl -fs --max-time 1 "$url" >/dev/null && return 0
		sleep 0.1
	done
	echo "before-after: $1 $2 did not answer at $url" >&2
	cat "$dir/$1-$2.log" >&2
	exit 1
}

# one BUILD STACK LOAD: a measurement with wrk (LOAD x1 or x16 pipelined);
# appends its figures to the rps and cpu tables.
declare -A rps cpu
one() {
	local key="$2 $3 $1" hz b0 b1 s0 s1 out reqs rate us
	local args=(-t"$THREADS" -c"$CONNS")
	[[ $3 == x1 ]] || args+=(-s bench/wrk-pipeline.lua)
	serve "$1" "$2"
	hz=$(getconf CLK_TCK)
	in_cli taskset -c 0 wrk "${args[@]}" -d1s "$url" -- "${3#x}" >/dev/null
	b0=$(busy)
	s0=$(stolen)
	out=$(in_cli taskset -c 0 wrk "${args[@]}" -d"$DURATION" "$url" -- "${3#x}")
	b1=$(busy)
	s1=$(stolen)
	stop_pids
	reqs=$(awk '/requests in/{print $1}' <<<"$out")
	rate=$(awk '/Requests\/sec/{print $2}' <<<"$out")
	us=$(awk -v b="$((b1 - b0))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.2f", b*1e6/hz/n}')
	awk '/Non-2xx|Socket errors/' <<<"$out" | sed "s/^/before-after: $key: /" >&2
	rps[$key]+="$rate "
	cpu[$key]+="$us "
	echo "round $r: $key: $rate req/s, $us CPU-µs/req, $((s1 - s0)) jiffies stolen" >&2
}

# stolen: jiffies the hypervisor gave to other guests (/proc/stat steal). On
# a VM a burst of it slows a round by 10-40% whatever the build; such a
# round says nothing about the change.
stolen() { awk '/^cpu /{print $9; exit}' /proc/stat; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
	for stack in native posix; do
		for load in x1 x16; do
			one base "$stack" "$load"
			one new "$stack" "$load"
		done
	done
done

echo
echo "load average before the run: $load0; base $(git rev-parse --short "$BASE"), new $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + work tree')"
echo "wrk -t$THREADS -c$CONNS -d$DURATION from the client namespace, keep-alive, GET / (5 bytes), one shard on CPU 1, $ROUNDS interleaved rounds, medians"
echo
echo "| stack | load | base req/s | new req/s | ratio | base CPU-µs/req | new CPU-µs/req | ratio |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for stack in native posix; do
	for load in x1 x16; do
		rb=$(median <<<"${rps[$stack $load base]}") rn=$(median <<<"${rps[$stack $load new]}")
		cb=$(median <<<"${cpu[$stack $load base]}") cn=$(median <<<"${cpu[$stack $load new]}")
		label="c$CONNS"
		[[ $load == x1 ]] || label+=" pipelined $load"
		printf '| %s | %s | %.0f | %.0f | %.3f | %s | %s | %.3f |\n' "$stack" "$label" "$rb" "$rn" \
			"$(awk -v a="$rn" -v b="$rb" 'BEGIN{print a/b}')" "$cb" "$cn" "$(awk -v a="$cn" -v b="$cb" 'BEGIN{print a/b}')"
	done
done
