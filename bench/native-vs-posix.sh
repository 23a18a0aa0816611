#!/usr/bin/env bash
# native-vs-posix.sh: requests/s and whole-machine CPU-µs per request of
# percore's httpd on the native stack (AF_XDP + userspace TCP/IP), the same
# httpd on the posix stack (kernel TCP), and nginx, all across the same veth
# lab and driven by the same client: wrk in the client namespace, keep-alive.
# One interleaved run (A B C A B C ...), medians over the rounds; prints a
# markdown table.
#
#   sudo bench/native-vs-posix.sh            # 3 rounds of 5 s per server
#   sudo ROUNDS=5 DURATION=10s bench/native-vs-posix.sh
#
# The lab: a veth pair with one queue per end between a server namespace and
# a client namespace (addresses from 198.18.0.0/15, names with this script's
# pid, removed on exit). The server end carries the kernel address .3 for
# the posix httpd and nginx; the native httpd answers for .1 on the same
# interface (its XDP program steers .1's ARP, ICMP and listen port to its
# AF_XDP socket and passes everything else to the kernel). Client end:
# tx checksum/TSO/GSO offloads off (the native stack drops partial
# checksums), net.core.txrehash=0.
#
# Every server runs one shard / worker on CPU 1, wrk on CPU 0 (taskset). CPU
# per request counts every busy jiffy of the machine (/proc/stat: user, nice,
# system, irq, softirq) during the wrk run, divided by the requests served:
# client, server and the kernel's veth work together, so compare the ratios.
# Everything it starts is stopped by pid; its files live in one temp dir.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}

cd "$(dirname "$0")/.."
source bench/lib.sh
need_root native-vs-posix "namespaces, XDP, AF_XDP"
need_tools native-vs-posix "apt-get install wrk nginx iproute2 ethtool curl" wrk nginx taskset ip ethtool curl go
need_cpus native-vs-posix 2 "server and wrk on separate cores"

id=$$
srv=pcb${id}-srv cli=pcb${id}-cli
vs=pcb${id}s vc=pcb${id}c
net=198.19.$((id % 200 + 20))
native_ip=$net.1 client_ip=$net.2 kernel_ip=$net.3
dir=$(mktemp -d /tmp/percore-nvp.XXXXXX)
clean_on_exit "$dir"
go build -o "$dir/httpd" ./cmd/httpd

one_queue_lab

in_cli() { ip netns exec "$cli" "$@"; }

# nginx with its own prefix, config, pid and logs under $dir; foreground so
# that $! is its master pid (ip netns exec execs it in place).
p="$dir/nginx"
mkdir -p "$p/logs"
cat >"$p/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity 10;
pid $p/nginx.pid;
error_log $p/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $p/body; proxy_temp_path $p/proxy; fastcgi_temp_path $p/fastcgi;
	uwsgi_temp_path $p/uwsgi; scgi_temp_path $p/scgi;
	keepalive_requests 1000000;
	server {
		listen $kernel_ip:8082 reuseport;
		location = / { default_type text/plain; return 200 "hello"; }
	}
}
CONF

# Started with ip netns exec directly (not through a shell function) so that
# $! is the server itself: ip and taskset exec it in place.
ip netns exec "$srv" taskset -c 1 "$dir/httpd" --network-stack native --iface "$vs" --host-ipv4-addr "$native_ip" \
	--smp 1 --cpuset 1 --port 8080 --stats-interval 0 2>"$dir/native.log" &
pids+=($!)
ip netns exec "$srv" taskset -c 1 "$dir/httpd" --smp 1 --cpuset 1 --address "$kernel_ip" --port 8081 --stats-interval 0 2>"$dir/posix.log" &
pids+=($!)
ip netns exec "$srv" taskset -c 1 nginx -p "$p" -c "$p/nginx.conf" -g 'daemon off;' &
pids+=($!)
names=("httpd native --smp 1" "httpd posix --smp 1" "nginx, 1 worker")
urls=("http://$native_ip:8080/" "http://$kernel_ip:8081/" "http://$kernel_ip:8082/")

for i in 0 1 2; do # wait until each answers
	for _ in $(seq 100); do
		in_cli curl -fs --max-time 1 "${urls[i]}" >/dev/null && break
		sleep 0.1
	done
	in_cli curl -fs --max-time 2 "${urls[i]}" >/dev/null || {
		echo "native-vs-posix: ${names[i]} did not answer at ${urls[i]}" >&2
		cat "$dir"/*.log >&2
		exit 1
	}
done

# proccpu (lib.sh) for the native httpd is nearly all the server side's work
# (its TCP/IP runs in the process); for posix and nginx the kernel's TCP runs
# partly in softirq outside it, so only the whole-machine column compares all
# three.

load0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A rps cpu srvcpu
for r in $(seq "$ROUNDS"); do
	for i in 0 1 2; do
		measure "${pids[i]}" "${urls[i]}" in_cli taskset -c 0
		[[ -z $errs ]] || echo "native-vs-posix: ${names[i]}: $errs" >&2
		rps[$i]+="$rate "
		cpu[$i]+="$us "
		srvcpu[$i]+="$sus "
		echo "round $r: ${names[i]}: $rate req/s, $us CPU-µs/req, server process $sus" >&2
	done
done

echo
echo "load average before the run: $load0 (other work on the machine inflates CPU-µs/req)"
echo "wrk -t$THREADS -c$CONNS -d$DURATION from the client namespace, keep-alive, GET / (5-byte body), $ROUNDS interleaved rounds, medians"
echo
echo "| server | req/s | whole-machine CPU-µs/req | server-process CPU-µs/req |"
echo "|---|---:|---:|---:|"
for i in 0 1 2; do
	printf '| %s | %.0f | %s | %s |\n' "${names[i]}" "$(median <<<"${rps[$i]}")" "$(median <<<"${cpu[$i]}")" "$(median <<<"${srvcpu[$i]}")"
done
