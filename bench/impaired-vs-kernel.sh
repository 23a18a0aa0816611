#!/usr/bin/env bash
# impaired-vs-kernel.sh: download time of one large file from nginx (Linux
# TCP sends) and from percore's httpd on the native stack (percore's TCP
# sends), through the same impairment bridge, for several impaired paths.
# For each path one lab (cmd/lab up --impair SPEC, seeded), both servers on
# it, downloads interleaved (nginx, percore, then percore, nginx: each round
# begins with the next sender), medians over the rounds; every download is
# checked byte-exact with sha256. Prints markdown tables: time and CPU with
# the percore/Linux ratio, the same ratio round by round (with BASE, also
# head/base round by round), context switches, the CPU time of the server's
# process and of the bridge's per download, retransmissions and D-SACKs
# received (nginx's from nstat, percore's from its Prometheus metrics),
# percore's shard sleeps and received frames per download, and the server's
# CPU in user and in kernel mode.
#
#   sudo bench/impaired-vs-kernel.sh                 # 3 rounds, 16 MiB
#   sudo ROUNDS=5 LARGE=1 bench/impaired-vs-kernel.sh  # and 64 MiB too
#   sudo TCP_CC=newreno ONLY=delay bench/impaired-vs-kernel.sh # percore's --tcp-cc; paths whose name contains ONLY
#   sudo ONLY='loss 1%' bench/impaired-vs-kernel.sh  # a name given whole: that path alone
#   sudo LINUX_CC=host bench/impaired-vs-kernel.sh   # nginx on the host's default (e.g. bbr)
#   sudo CLIENT_TS=0 ONLY=reorder bench/impaired-vs-kernel.sh # a client without TCP timestamps (as Windows)
#   sudo BASE=50253eb ONLY='loss 1%' bench/impaired-vs-kernel.sh # before/after: httpd at BASE and at the work tree
#   sudo BASE=HEAD HEAD_ARGS='--idle-poll-time-us 50' bench/impaired-vs-kernel.sh # one build, a flag tried
#
# BASE=<commit> builds httpd at that commit (in a git worktree under the
# run's temporary directory, removed on exit) as well as at the work tree,
# and each round downloads from nginx, percore at BASE, percore at the work
# tree (head), in that order; the table adds head/base and head/Linux
# ratios. Two native servers cannot share the lab's one queue, so each
# download from percore starts its build afresh, waits until it answers,
# and makes one untimed warm-up download (it fills httpd's file cache)
# before the timed one. HEAD_ARGS and BASE_ARGS are added to the command
# line of each build's httpd (split on spaces): with BASE=HEAD and a clean
# work tree, one build against itself with a flag changed.
#
# By default nginx's connections use the same congestion control as
# percore's (cubic, or reno for newreno), set on the lab's route (ip route
# ... congctl): a host whose default is BBR, which does not reduce its
# window on random loss, would otherwise compare two different algorithms,
# not two stacks. LINUX_CC=host keeps the host's default; LINUX_CC=NAME sets
# another.
#
# The lab: client and server namespaces joined by a one-queue veth pair
# through a middle namespace where the bridge (in the cmd/lab process)
# drops, reorders, duplicates, corrupts and delays frames in both
# directions (addresses from 198.18.0.0/15). percore answers for the lab's
# .1 with its XDP program; nginx listens on the kernel address .3 of the
# same interface, so both see the same bridge. The bridge's random stream
# is seeded once per path and runs on across the downloads, so each server
# sees the same kind of faults, not the same frames. Names carry this
# script's pid; everything is stopped by pid and removed on exit.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

ROUNDS=${ROUNDS:-3}
LARGE=${LARGE:-0}
TCP_CC=${TCP_CC:-cubic}
ONLY=${ONLY:-}
BASE=${BASE:-}
HEAD_ARGS=${HEAD_ARGS:-}
BASE_ARGS=${BASE_ARGS:-}
LINUX_CC=${LINUX_CC:-}
if [[ -z $LINUX_CC ]]; then
	LINUX_CC=$TCP_CC
	[[ $TCP_CC == newreno ]] && LINUX_CC=reno
fi
PER_GET=${PER_GET:-300} # seconds a download may take before it counts as failed
CLIENT_TS=${CLIENT_TS:-1} # 0: the client offers no TCP timestamps (RFC 7323)
[[ $CLIENT_TS == [01] ]] || { echo "impaired-vs-kernel: CLIENT_TS=$CLIENT_TS: give 0 or 1" >&2; exit 2; }

cd "$(dirname "$0")/.."
source bench/lib.sh
need_root impaired-vs-kernel "namespaces, XDP, AF_XDP"
tools=(nginx curl sha256sum ip nstat ethtool go)
[[ -z $BASE ]] || tools+=(git)
need_tools impaired-vs-kernel "apt-get install nginx curl iproute2 ethtool" "${tools[@]}"
if [[ -n $BASE ]]; then
	base_rev=$(git rev-parse --verify -q "$BASE^{commit}") || { echo "impaired-vs-kernel: BASE=$BASE is not a commit" >&2; exit 2; }
fi

paths=(
	"full mix|loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=1"
	"loss 1%|loss=1%,seed=1"
	"reorder 10%|reorder=10%,seed=1"
	"delay 10 ms, loss 1%|delay=10ms,loss=1%,seed=1"
	"no impairment|loss=0%,seed=1"
)
if [[ -n $ONLY ]]; then
	exact=0 # a name equal to ONLY selects that path alone ("loss 1%", not the delay path too)
	for p in "${paths[@]}"; do
		[[ ${p%%|*} == "$ONLY" ]] && exact=1
	done
	for i in "${!paths[@]}"; do
		if ((exact)); then
			[[ ${paths[i]%%|*} == "$ONLY" ]] || unset 'paths[i]'
		else
			[[ ${paths[i]%%|*} == *"$ONLY"* ]] || unset 'paths[i]'
		fi
	done
	((${#paths[@]})) || { echo "impaired-vs-kernel: no path name contains $ONLY" >&2; exit 2; }
fi
sizes=(16)
((LARGE)) && sizes+=(64)

# The senders of each round, in order; a percore build is head (the work
# tree) or base.
senders=(nginx head)
[[ -z $BASE ]] || senders=(nginx base head)

id=$$
prefix=pi$((id % 100000))
dir=$(mktemp -d /tmp/percore-ivk.XXXXXX)
clean_on_exit "$dir"

[[ -z $BASE ]] || build_httpd_at "$base_rev" "$dir/httpd-base"
go build -o "$dir/httpd-head" ./cmd/httpd
go build -o "$dir/lab" ./cmd/lab

# pace: seconds a fixed loop of the shell takes, a gauge of the host's pace.
# The host may run this guest slower for minutes without reporting steal
# time; the same download then takes several times its CPU-seconds.
pace() {
	local TIMEFORMAT=%R
	{ time for _ in $(seq 300000); do :; done; } 2>&1
}
pace0=$(pace)

chmod 755 "$dir" # nginx workers run as an unprivileged user
mkdir -p "$dir/www"
declare -A sum
for s in "${sizes[@]}"; do
	head -c $((s << 20)) /dev/urandom >"$dir/www/f$s"
	sum[$s]=$(sha256sum <"$dir/www/f$s" | cut -d' ' -f1)
done

# nginx with its own prefix, config, pid and logs under $dir, in the
# foreground so that $! is its master pid.
nginx_conf() {
	local p=$dir/nginx
	mkdir -p "$p/logs"
	cat >"$p/nginx.conf" <<CONF
worker_processes 1;
pid $p/nginx.pid;
error_log $p/logs/error.log warn;
events { worker_connections 64; }
http {
	access_log off;
	sendfile on;
	client_body_temp_path $p/body; proxy_temp_path $p/proxy; fastcgi_temp_path $p/fastcgi;
	uwsgi_temp_path $p/uwsgi; scgi_temp_path $p/scgi;
	server {
		listen $1:8082;
		root $dir/www;
	}
}
CONF
}

# start_httpd BUILD: the httpd built at BUILD (head or base) on the native
# stack, answering for the lab's .1; on pids, and in httpd_pid.
start_httpd() {
	local extra_args=()
	case $1 in
	head) read -ra extra_args <<<"$HEAD_ARGS" ;;
	base) read -ra extra_args <<<"$BASE_ARGS" ;;
	esac
	ip netns exec "$srvns" "$dir/httpd-$1" --network-stack native --iface "$srvif" --host-ipv4-addr "$ip1" \
		--tcp-cc "$TCP_CC" --smp 1 --port 8080 --docroot "$dir/www" --stats-interval 0 \
		--prometheus-port 9180 "${extra_args[@]}" 2>>"$dir/$1.log" &
	httpd_pid=$!
	pids+=("$httpd_pid")
}

# stop_httpd: stop httpd_pid and wait for it (it detaches its XDP program
# on the way out), so that the next build finds the queue free.
stop_httpd() {
	local p rest=()
	kill -TERM "$httpd_pid" 2>/dev/null || true
	wait "$httpd_pid" 2>/dev/null || true
	for p in "${pids[@]}"; do
		[[ $p == "$httpd_pid" ]] || rest+=("$p")
	done
	pids=("${rest[@]}")
}

# answers URL LOG...: wait until URL answers in the client namespace, or
# fail the script showing the LOGs.
answers() {
	local u=$1
	shift
	for _ in $(seq 100); do
		ip netns exec "$cli" curl -fs --max-time 1 -o /dev/null -I "$u/f${sizes[0]}" && return 0
		sleep 0.1
	done
	ip netns exec "$cli" curl -fsS --max-time 2 -o /dev/null -I "$u/f${sizes[0]}" && return 0
	echo "impaired-vs-kernel: $u does not answer" >&2
	cat "$@" >&2
	exit 1
}

# get URL SIZE: one download in the client namespace; sets t (seconds),
# ttfb (seconds to the first byte of the response),
# cpu (the whole machine's busy CPU-seconds meanwhile: sender, bridge and
# curl share the CPUs, so this is the fairer figure when they are all busy)
# and sw (the machine's context switches meanwhile: on a VM each wake-up
# across CPUs is an interrupt, and they make most of the difference), or
# fails the script when the bytes differ.
get() {
	local out=$dir/got b0 s0 w
	rm -f "$out"
	b0=$(busy)
	s0=$(switches)
	w=$(ip netns exec "$cli" curl -fsS --max-time "$PER_GET" -o "$out" -w '%{time_starttransfer} %{time_total}' "$1") || {
		echo "impaired-vs-kernel: $1 failed" >&2
		return 1
	}
	read -r ttfb t <<<"$w"
	cpu=$(awk -v d=$(($(busy) - b0)) -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.3f", d/hz}')
	sw=$(($(switches) - s0))
	[[ $(sha256sum <"$out" | cut -d' ' -f1) == "${sum[$2]}" ]] || {
		echo "impaired-vs-kernel: $1: the bytes differ" >&2
		return 1
	}
}

# counters SENDER: "retransmissions D-SACKs sleeps batches frames" the
# sender has counted so far (segments sent again; D-SACK blocks received,
# each the peer's word that a segment came twice; then percore's alone, 0
# for nginx: the shard's sleeps, and the batches of frames it received and
# the frames in them, ACKs nearly all: a sender woken for small batches
# spends its CPU on wake-ups): nginx's from the server namespace's kernel
# counters, percore's from its metrics (both counted from the server's start).
counters() {
	if [[ $1 == nginx ]]; then
		ip netns exec "$srvns" nstat -asz TcpRetransSegs TcpExtTCPDSACKRecv |
			awk '$1=="TcpRetransSegs"{r=$2} $1=="TcpExtTCPDSACKRecv"{d=$2} END{print r+0, d+0, 0, 0, 0}'
	else
		ip netns exec "$srvns" curl -fsS --max-time 5 http://127.0.0.1:9180/metrics |
			awk '$1 ~ /^percore_tcp_retransmits_total/{r+=$2} $1 ~ /^percore_tcp_ds_acks_in_total/{d+=$2}
				$1 ~ /^percore_loop_sleeps_total/{z+=$2} $1 ~ /^percore_xsk_rx_batches_total/{b+=$2}
				$1 ~ /^percore_xsk_rx_frames_total/{f+=$2}
				END{printf "%.0f %.0f %.0f %.0f %.0f\n", r, d, z, b, f}'
	fi
}

# switches: the machine's context switches since boot.
switches() { awk '/^ctxt /{print $2; exit}' /proc/stat; }

# ratio A B: A/B, or 0 when B is 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{print (b > 0 ? a/b : 0)}'; }

# label SENDER: the sender's name in the progress lines.
label() {
	case $1 in
	nginx) echo nginx ;;
	head) [[ -z $BASE ]] && echo percore || echo percore head ;;
	base) echo percore base ;;
	esac
}

declare -A res cpus sws rtxs dsacks sleeps batches frames srvcpus brcpus users kernels url
for path in "${paths[@]}"; do
	name=${path%%|*} spec=${path#*|}
	# The lab holds while its process runs; SIGTERM removes it.
	"$dir/lab" up --queues 1 --prefix "$prefix" --impair "$spec" >"$dir/lab.out" 2>&1 &
	labpid=$!
	pids+=("$labpid")
	for _ in $(seq 100); do
		grep -q '^holding' "$dir/lab.out" && break
		kill -0 "$labpid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q '^holding' "$dir/lab.out" || { cat "$dir/lab.out" >&2; exit 1; }
	read -r srvif srvns ip1 < <(sed -n 's/^server interface: \([^ ]*\) in netns \([^ ]*\) .*--host-ipv4-addr \([^ ]*\) .*/\1 \2 \3/p' "$dir/lab.out")
	cli=$(sed -n 's/^client commands:  ip netns exec \([^ ]*\) .*/\1/p' "$dir/lab.out")
	ip3=${ip1%.*}.3
	ip -n "$srvns" addr add "$ip3/24" dev "$srvif"
	# Both senders then go without timestamps: a connection has them only
	# when the client's SYN offers them.
	ip netns exec "$cli" sysctl -qw net.ipv4.tcp_timestamps="$CLIENT_TS"
	# The bridge copies frames as they are: the kernel must send whole,
	# checksummed ones (the lab does the same on the client end).
	ip netns exec "$srvns" ethtool -K "$srvif" tx off tso off gso off >/dev/null
	if [[ $LINUX_CC == host ]]; then
		linux_cc=$(ip netns exec "$srvns" sysctl -n net.ipv4.tcp_congestion_control)
	else
		# Per route, as the namespace's sysctl may be read-only.
		net=$(ip -n "$srvns" route show dev "$srvif" proto kernel | awk '{print $1; exit}')
		ip -n "$srvns" route replace "$net" dev "$srvif" congctl "$LINUX_CC"
		linux_cc=$LINUX_CC
	fi
	nginx_conf "$ip3"
	url=([nginx]="http://$ip3:8082" [head]="http://$ip1:8080" [base]="http://$ip1:8080")

	# Without BASE the one httpd serves the whole path; with it each
	# download from percore starts its build (below).
	[[ -n $BASE ]] || start_httpd head
	ip netns exec "$srvns" nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -g 'daemon off;' &
	nginx_pid=$!
	pids+=("$nginx_pid")
	answers "${url[nginx]}" "$dir/nginx/logs/error.log"
	[[ -n $BASE ]] || answers "${url[head]}" "$dir/head.log"

	for s in "${sizes[@]}"; do
		for r in $(seq "$ROUNDS"); do
			# Each round begins with the next sender, so that each
			# goes first (after the pause between sizes and rounds)
			# as often as the others.
			k=$(((r - 1) % ${#senders[@]}))
			for sender in "${senders[@]:k}" "${senders[@]:0:k}"; do
				if [[ -n $BASE && $sender != nginx ]]; then
					start_httpd "$sender"
					answers "${url[$sender]}" "$dir/$sender.log"
					get "${url[$sender]}/f$s" "$s" # warm-up, untimed
				fi
				server_pid=$httpd_pid
				[[ $sender == nginx ]] && server_pid=$nginx_pid
				read -r r0 d0 z0 rb0 rf0 < <(counters "$sender")
				p0=$(proccpu_us "$server_pid") l0=$(proccpu_us "$labpid")
				read -r mu0 mk0 < <(procmodes "$server_pid")
				get "${url[$sender]}/f$s" "$s"
				p1=$(proccpu_us "$server_pid") l1=$(proccpu_us "$labpid")
				read -r mu1 mk1 < <(procmodes "$server_pid")
				read -r r1 d1 z1 rb1 rf1 < <(counters "$sender")
				[[ -z $BASE || $sender == nginx ]] || stop_httpd
				rtx=$((r1 - r0)) dsack=$((d1 - d0)) slept=$((z1 - z0)) rb=$((rb1 - rb0)) rf=$((rf1 - rf0))
				srv_ms=$(((p1 - p0) / 1000)) br_ms=$(((l1 - l0) / 1000))
				res[$name,$s,$sender]+="$t "
				cpus[$name,$s,$sender]+="$cpu "
				sws[$name,$s,$sender]+="$sw "
				rtxs[$name,$s,$sender]+="$rtx "
				dsacks[$name,$s,$sender]+="$dsack "
				sleeps[$name,$s,$sender]+="$slept "
				batches[$name,$s,$sender]+="$rb "
				frames[$name,$s,$sender]+="$rf "
				srvcpus[$name,$s,$sender]+="$srv_ms "
				brcpus[$name,$s,$sender]+="$br_ms "
				users[$name,$s,$sender]=$((${users[$name,$s,$sender]:-0} + mu1 - mu0))
				kernels[$name,$s,$sender]=$((${kernels[$name,$s,$sender]:-0} + mk1 - mk0))
				extra=
				[[ $sender == nginx ]] || extra=", $slept sleeps, $rf frames received in $rb batches"
				echo "$name, $s MiB, round $r: $(label "$sender") $t s (first byte $ttfb s), $cpu CPU-s" \
					"(server $srv_ms ms, bridge $br_ms ms), $sw context switches," \
					"$rtx retransmissions, $dsack D-SACKs$extra" >&2
			done
		done
	done
	stop_pids # servers, then the lab (which prints the bridge's counters)
	echo "$name: bridge $(tail -n 2 "$dir/lab.out" | tr '\n' ' ')" >&2
done

echo
if [[ -z $BASE ]]; then
	echo "Download from nginx (Linux TCP, $linux_cc) and percore native (--tcp-cc $TCP_CC), one file,"
	echo "curl in the client namespace, $ROUNDS interleaved rounds (each begins with the next sender), medians;"
	echo "every download sha256-checked."
else
	echo "Download from nginx (Linux TCP, $linux_cc) and percore native (--tcp-cc $TCP_CC) built at base"
	echo "$(git rev-parse --short "$base_rev") and at head $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + work tree'), one file, curl in the client namespace,"
	echo "$ROUNDS interleaved rounds (nginx, base, head, each round beginning with the next; each httpd"
	echo "started afresh, one untimed warm-up download), medians; every download sha256-checked."
fi
echo "CPU-s: the whole machine's busy time during a download (/proc/stat), the bridge and curl included."
[[ -z $HEAD_ARGS ]] || echo "percore${BASE:+ head} ran with these flags added: $HEAD_ARGS"
[[ -z $BASE_ARGS || -z $BASE ]] || echo "percore base ran with these flags added: $BASE_ARGS"
echo "Host pace (a fixed shell loop, s; lower is faster): $pace0 before the run, $(pace) after."
((CLIENT_TS)) || echo "The client offered no TCP timestamps (CLIENT_TS=0): neither sender used them."
echo
if [[ -z $BASE ]]; then
	echo "| path | size | nginx (Linux) s | percore native s | percore/Linux | nginx CPU-s | percore CPU-s | percore/Linux |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
else
	echo "| path | size | nginx (Linux) s | base s | head s | head/base | head/Linux | nginx CPU-s | base CPU-s | head CPU-s | head/base | head/Linux |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
fi
for path in "${paths[@]}"; do
	name=${path%%|*} spec=${path#*|}
	for s in "${sizes[@]}"; do
		a=$(median <<<"${res[$name,$s,nginx]}")
		b=$(median <<<"${res[$name,$s,head]}")
		ca=$(median <<<"${cpus[$name,$s,nginx]}")
		cb=$(median <<<"${cpus[$name,$s,head]}")
		if [[ -z $BASE ]]; then
			printf "| %s (\`%s\`) | %d MiB | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx |\n" "$name" "$spec" "$s" "$a" "$b" \
				"$(ratio "$b" "$a")" "$ca" "$cb" "$(ratio "$cb" "$ca")"
		else
			o=$(median <<<"${res[$name,$s,base]}")
			co=$(median <<<"${cpus[$name,$s,base]}")
			printf "| %s (\`%s\`) | %d MiB | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.2f | %.2f | %.2f | %.2fx | %.2fx |\n" \
				"$name" "$spec" "$s" "$a" "$o" "$b" "$(ratio "$b" "$o")" "$(ratio "$b" "$a")" \
				"$ca" "$co" "$cb" "$(ratio "$cb" "$co")" "$(ratio "$cb" "$ca")"
		fi
	done
done

# paired A B: A over B round by round, a ratio a line; A and B are lists of
# one figure a round, in the order of the rounds.
paired() {
	paste -d' ' <(tr ' ' '\n' <<<"$1") <(tr ' ' '\n' <<<"$2") | awk 'NF == 2 && $2 > 0 { print $1 / $2 }'
}

# by_round RATIOS: "median, N of M rounds", N the rounds whose ratio is below 1.
by_round() {
	printf '%.2fx, %d of %d rounds' "$(median <<<"$1")" "$(awk '$1 < 1' <<<"$1" | wc -l)" "$(grep -c . <<<"$1")"
}

# Round by round: each percore build's time over nginx's in the same round,
# the median of those ratios and the rounds in which percore was faster.
# Paired by round, the ratio does not move with the machine's speed from
# one round to the next (the host's steal time, a neighbour's load), which
# the ratio of the medians above does.
echo
echo "| path | size |$(for x in "${senders[@]:1}"; do printf ' %s/Linux round by round: median, faster in |' "$(label "$x")"; done)"
echo "|---|---:|$(for _ in "${senders[@]:1}"; do printf -- '---:|'; done)"
for path in "${paths[@]}"; do
	name=${path%%|*}
	for s in "${sizes[@]}"; do
		printf '| %s | %d MiB |' "$name" "$s"
		for x in "${senders[@]:1}"; do
			printf ' %s |' "$(by_round "$(paired "${res[$name,$s,$x]}" "${res[$name,$s,nginx]}")")"
		done
		echo
	done
done

# With BASE, head against base round by round: the pair nearest in time,
# the fairest measure of a change (the host's pace moves both alike).
if [[ -n $BASE ]]; then
	echo
	echo "| path | size | head/base round by round: time, faster in | CPU-s |"
	echo "|---|---:|---:|---:|"
	for path in "${paths[@]}"; do
		name=${path%%|*}
		for s in "${sizes[@]}"; do
			printf '| %s | %d MiB | %s | %.2fx |\n' "$name" "$s" \
				"$(by_round "$(paired "${res[$name,$s,head]}" "${res[$name,$s,base]}")")" \
				"$(median <<<"$(paired "${cpus[$name,$s,head]}" "${cpus[$name,$s,base]}")")"
		done
	done
fi

# per_sender_table HEADING CELL: a table with a row per path and size and a
# column per sender, headed "SENDER HEADING"; CELL NAME SIZE SENDER prints
# a cell.
per_sender_table() {
	local heading=$1 cell=$2 path name s x
	echo
	echo "| path | size |$(for x in "${senders[@]}"; do printf ' %s %s |' "$(label "$x")" "$heading"; done)"
	echo "|---|---:|$(for _ in "${senders[@]}"; do printf -- '---:|'; done)"
	for path in "${paths[@]}"; do
		name=${path%%|*}
		for s in "${sizes[@]}"; do
			printf '| %s | %d MiB |' "$name" "$s"
			for x in "${senders[@]}"; do
				printf ' %s |' "$("$cell" "$name" "$s" "$x")"
			done
			echo
		done
	done
}

# The machine's context switches per download, medians.
switches_cell() { printf '%.0f' "$(median <<<"${sws[$1,$2,$3]}")"; }
per_sender_table switches switches_cell

# The CPU-ms of the server's process (nginx's master and worker, or
# httpd) and of the bridge's (the lab's) per download, medians. Linux's
# TCP sends from the softirq of the bridge's sendmmsg that brings the ACK,
# so nginx's sending is counted in the bridge; percore's shard is a thread
# of its own, woken by the ACKs.
party_cell() { printf '%.0f / %.0f' "$(median <<<"${srvcpus[$1,$2,$3]}")" "$(median <<<"${brcpus[$1,$2,$3]}")"; }
per_sender_table "CPU-ms: server / bridge" party_cell

# The server's CPU-ms per download in user and in kernel mode, means over
# the rounds (from jiffies, too coarse for one download). percore's kernel
# part is AF_XDP's transmit (in copy mode the kernel builds and sends an skb
# a frame, and on a veth each runs the peer's receive in the sender's system
# call) and its sleeps; its user part, its own TCP and HTTP, bounds what
# making percore's code faster could gain.
modes_cell() {
	awk -v u="${users[$1,$2,$3]}" -v k="${kernels[$1,$2,$3]}" -v n="$ROUNDS" -v hz="$(getconf CLK_TCK)" \
		'BEGIN{printf "%.1f / %.1f", u * 1000 / hz / n, k * 1000 / hz / n}'
}
per_sender_table "CPU-ms: user / kernel" modes_cell

# Retransmissions and D-SACKs received per download, medians: a D-SACKed
# retransmission was needless (the segment had arrived).
retransmits_cell() { printf '%g / %g' "$(median <<<"${rtxs[$1,$2,$3]}")" "$(median <<<"${dsacks[$1,$2,$3]}")"; }
per_sender_table "retransmissions / D-SACKs" retransmits_cell

# percore's shard per download, medians: sleeps, frames received (ACKs)
# and the batches they came in. nginx's TCP has no such counters.
wakes_cell() {
	[[ $3 == nginx ]] && { printf -- '-'; return; }
	printf '%.0f / %.0f / %.0f' "$(median <<<"${sleeps[$1,$2,$3]}")" "$(median <<<"${frames[$1,$2,$3]}")" "$(median <<<"${batches[$1,$2,$3]}")"
}
per_sender_table "shard sleeps / frames received / batches" wakes_cell
