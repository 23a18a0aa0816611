# lib.sh: helpers that the bench scripts source, from the repository root.
# Sourcing it defines functions only: no variable, no trap. Jiffies convert
# to time with $(getconf CLK_TCK).

# need_root NAME WHY: exit 2 unless root.
need_root() { [[ $(id -u) == 0 ]] || { echo "$1: needs root ($2)" >&2; exit 2; }; }

# need_tools NAME HINT TOOL...: exit 2 naming the first TOOL not found, and
# HINT (how to install them).
need_tools() {
	local name=$1 hint=$2 tool
	shift 2
	for tool; do
		command -v "$tool" >/dev/null || { echo "$name: $tool not found; $hint" >&2; exit 2; }
	done
}

# need_cpus NAME N WHY: exit 2 with fewer than N CPUs.
need_cpus() { (($(nproc) >= $2)) || { echo "$1: needs $2 CPUs ($3), have $(nproc)" >&2; exit 2; }; }

# stop_pids: stop the processes listed in pids (SIGTERM, then wait for each:
# httpd removes its lab, nginx its workers) and empty the list.
stop_pids() {
	local p
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}

# clean_on_exit [DIR]: on exit, whatever the cause, stop the processes in
# pids, delete the network namespaces in namespaces, run cleanup_more if the
# script defines it, and remove the directory DIR. The script adds to pids
# and namespaces as it starts and makes them.
clean_on_exit() {
	pids=() namespaces=() bench_dir=${1:-}
	trap bench_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

bench_exit() {
	local ns
	stop_pids
	for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	if declare -F cleanup_more >/dev/null; then cleanup_more || true; fi
	[[ -z ${base_tree:-} ]] || git -C "$base_repo" worktree remove --force "$base_tree" 2>/dev/null || true
	[[ -z $bench_dir ]] || rm -rf "$bench_dir"
	return 0
}

# build_httpd_at COMMIT OUT: builds cmd/httpd as it was at COMMIT into OUT,
# in a git worktree under clean_on_exit's directory, which the exit removes.
# Run from the repository's root.
build_httpd_at() {
	base_repo=$PWD base_tree=$bench_dir/base
	git worktree add -q --detach "$base_tree" "$1"
	(cd "$base_tree" && go build -o "$2" ./cmd/httpd)
}

# busy: the machine's busy jiffies so far (/proc/stat: user, nice, system,
# irq, softirq; not idle, iowait or steal).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat; }

# proccpu PID: utime+stime jiffies of PID and its child processes (nginx
# workers), a figure that other work on the machine does not inflate.
proccpu() { procmodes "$1" | awk '{printf "%.0f\n", $1 + $2}'; }

# proccpu_us PID...: CPU-µs of each PID and its child processes, all their
# threads, from /proc/PID/task/TID/schedstat (nanoseconds on the CPU): finer
# than the jiffies of proccpu, for figures of a few milliseconds.
proccpu_us() {
	local p files=()
	for p in "$@" $(for p in "$@"; do pgrep -P "$p" || true; done); do
		files+=(/proc/"$p"/task/*/schedstat)
	done
	cat "${files[@]}" 2>/dev/null | awk '{t += $1} END {printf "%.0f\n", t / 1000}'
}

# procmodes PID: "user kernel", the jiffies PID and its child processes (all
# their threads) spent in user and in kernel mode (/proc/PID/stat's utime and
# stime): whose code a process's time went to. Sampled at each tick, so sum
# many downloads before dividing.
procmodes() {
	local p
	for p in "$1" $(pgrep -P "$1" || true); do
		cat "/proc/$p/stat" 2>/dev/null || true
	done | awk '{u += $14; s += $15} END {printf "%.0f %.0f\n", u, s}'
}

# median: the median of the numbers on stdin (separated by spaces or newlines).
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# measure PID URL [RUNNER...]: one wrk run against URL (wrk -t$THREADS
# -c$CONNS -d$DURATION, after a 1 s warm-up), started through RUNNER (e.g.
# `taskset -c 0`, or a function that enters the client namespace). Sets rate
# (req/s), us (whole-machine CPU-µs/req), sus (PID's own CPU-µs/req) and errs
# (wrk's error lines, empty when none).
measure() {
	local pid=$1 url=$2 hz b0 p0 b1 p1 out reqs
	shift 2
	hz=$(getconf CLK_TCK)
	"$@" wrk -t"$THREADS" -c"$CONNS" -d1s "$url" >/dev/null
	b0=$(busy)
	p0=$(proccpu "$pid")
	out=$("$@" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$url")
	b1=$(busy)
	p1=$(proccpu "$pid")
	reqs=$(awk '/requests in/{print $1}' <<<"$out")
	rate=$(awk '/Requests\/sec/{print $2}' <<<"$out")
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	us=$(awk -v b="$((b1 - b0))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.1f", b*1e6/hz/n}')
	sus=$(awk -v b="$((p1 - p0))" -v n="$reqs" -v hz="$hz" 'BEGIN{printf "%.1f", b*1e6/hz/n}')
}

# one_queue_lab: the side-by-side scripts' lab, from the caller's variables:
# namespaces $srv and $cli joined by a one-queue veth pair $vs <-> $vc, the
# kernel address $kernel_ip on the server end and $client_ip on the client
# end, the client end's tx checksum/TSO/GSO offloads off (the native stack
# drops partial checksums) and net.core.txrehash=0 there (a flow keeps its
# queue). The namespaces go on the namespaces list (clean_on_exit).
one_queue_lab() {
	ip netns add "$srv"
	namespaces+=("$srv")
	ip netns add "$cli"
	namespaces+=("$cli")
	ip link add "$vs" numtxqueues 1 numrxqueues 1 netns "$srv" type veth peer name "$vc" numtxqueues 1 numrxqueues 1 netns "$cli"
	ip -n "$srv" link set lo up
	ip -n "$cli" link set lo up
	ip -n "$srv" link set "$vs" up
	ip -n "$cli" link set "$vc" up
	ip -n "$srv" addr add "$kernel_ip/24" dev "$vs"
	ip -n "$cli" addr add "$client_ip/24" dev "$vc"
	ip netns exec "$cli" ethtool -K "$vc" tx off tso off gso off >/dev/null
	ip netns exec "$cli" sysctl -qw net.core.txrehash=0
}
