#!/usr/bin/env bash
# busy-poll.sh: httpd on the native stack without and with --busy-poll, on
# the lab (httpd --lab: its own veth pair and namespaces, removed when it
# stops), driven by native wreck with two shards and 64 keep-alive
# connections. Both servers run at once, each on its own lab; the rounds
# alternate them, and the server's CPU-µs per request is its own user+system
# time over the requests. Medians over the rounds.
#
#   sudo bench/busy-poll.sh
#   sudo ROUNDS=5 DUR=5 PIPELINE=16 BUDGET=64 bench/busy-poll.sh
#
# veth has no NAPI poll for busy polling to drive: this shows its cost here,
# not its effect on a NIC.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin
cd "$(dirname "$0")/.."
source bench/lib.sh
need_root busy-poll "lab, XDP, AF_XDP"
need_tools busy-poll "install Go" go
ROUNDS=${ROUNDS:-5} DUR=${DUR:-5} PIPELINE=${PIPELINE:-1} BUDGET=${BUDGET:-64}
t=$(mktemp -d /tmp/busy-poll.XXXXXX)
clean_on_exit "$t"
go build -o "$t/httpd" ./cmd/httpd
go build -o "$t/wreck" ./cmd/wreck

start() { # name port args...
	local n=$1 port=$2; shift 2
	"$t/httpd" --network-stack native --lab --smp 2 --port "$port" --stats-interval 0 "$@" >"$t/$n.out" 2>"$t/$n.err" &
	pids+=($!)
	eval "pid_$n=$!"
	for _ in $(seq 100); do grep -q '^lab: ' "$t/$n.out" 2>/dev/null && break; sleep 0.1; done
	read -r ip cif cns < <(sed -n 's/^lab: [^:]*: server [^ ]* (ns [^,]*, \([0-9.]*\), [^)]*) <-> client \([^ ]*\) (ns \([^,]*\),.*/\1 \2 \3/p' "$t/$n.out")
	eval "ip_$n=$ip cif_$n=$cif cns_$n=$cns port_$n=$port"
}
start off 18201
start on 18202 --busy-poll "$BUDGET"
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
: >"$t/results"
for r in $(seq "$ROUNDS"); do
	for n in off on; do
		eval "pid=\$pid_$n ip=\$ip_$n cif=\$cif_$n cns=\$cns_$n port=\$port_$n"
		s0=$(ticks "$pid")
		ip netns exec "$cns" "$t/wreck" --network-stack native --iface "$cif" --host-ipv4-addr "${ip%.*}.3" --server "$ip:$port" \
			--smp 2 --conn 64 --pipeline "$PIPELINE" --duration "${DUR}s" >"$t/out" 2>"$t/err"
		s1=$(ticks "$pid")
		reqs=$(awk '/requests in/{print $1; exit}' "$t/out")
		rps=$(awk '/^Requests\/sec:/{print $2}' "$t/out")
		awk -v n=$n -v r="$rps" -v q="$reqs" -v d=$((s1 - s0)) -v hz="$hz" -v round="$r" \
			'BEGIN{printf "round %d: busy polling %s: %.0f req/s, %.2f server CPU-us/req\n", round, n, r, d*1e6/hz/q}' | tee -a "$t/results"
	done
done
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); pipeline $PIPELINE, $ROUNDS rounds of ${DUR}s, medians"
echo "| busy polling | req/s | server CPU-µs/req |"
echo "|---|---:|---:|"
for n in off on; do
	echo "| $n | $(awk -v n=$n '$5==n":"{print $6}' "$t/results" | median) | $(awk -v n=$n '$5==n":"{print $8}' "$t/results" | median) |"
done
