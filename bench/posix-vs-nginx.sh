#!/usr/bin/env bash
# posix-vs-nginx.sh: requests/s and whole-machine CPU-µs per request of percore's
# httpd (posix stack) with --smp 1 and --smp 2 beside nginx with matching
# worker_processes, over loopback with wrk (keep-alive), interleaved A B C D
# per round, medians over the rounds. Prints a markdown table.
#
#   bench/posix-vs-nginx.sh            # 3 rounds of 5 s per server
#   ROUNDS=5 DURATION=10s bench/posix-vs-nginx.sh
#
# smp 1: the server process (every thread) on CPU 1, wrk on CPU 0 (taskset). smp 2: the servers on
# CPUs 0-1 and wrk unpinned, sharing them. CPU per request counts every busy
# jiffy of the machine (/proc/stat: all but idle, iowait and steal) during the
# wrk run, divided by the requests served: client and server together, so the
# ratio between servers is what to compare. Everything it starts is stopped by
# pid; its files live in one temp dir.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}
BASE_PORT=${BASE_PORT:-18080}

cd "$(dirname "$0")/.."
source bench/lib.sh
need_tools posix-vs-nginx "apt-get install wrk nginx" wrk nginx taskset go
need_cpus posix-vs-nginx 2 "server and wrk on separate cores"

dir=$(mktemp -d /tmp/percore-bench.XXXXXX)
clean_on_exit "$dir"
go build -o "$dir/httpd" ./cmd/httpd

# nginx with its own prefix, config, pid and logs under $dir; foreground so
# that $! is its master pid.
start_nginx() { # name workers affinity cpus port
	local name=$1 workers=$2 affinity=$3 cpus=$4 port=$5 p="$dir/$1"
	mkdir -p "$p/logs"
	cat >"$p/nginx.conf" <<CONF
worker_processes $workers;
worker_cpu_affinity $affinity;
pid $p/nginx.pid;
error_log $p/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $p/body; proxy_temp_path $p/proxy; fastcgi_temp_path $p/fastcgi;
	uwsgi_temp_path $p/uwsgi; scgi_temp_path $p/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$port reuseport;
		location = / { default_type text/plain; return 200 "hello"; }
	}
}
CONF
	taskset -c "$cpus" nginx -p "$p" -c "$p/nginx.conf" -g 'daemon off;' &
	pids+=($!)
}

start_httpd() { # smp cpuset port
	taskset -c "$2" "$dir/httpd" --smp "$1" --cpuset "$2" --address 127.0.0.1 --port "$3" 2>"$dir/httpd-$1.log" &
	pids+=($!)
}

start_httpd 1 1 $((BASE_PORT + 1))
start_nginx nginx1 1 10 1 $((BASE_PORT + 2))
start_httpd 2 0-1 $((BASE_PORT + 3))
start_nginx nginx2 2 "01 10" 0-1 $((BASE_PORT + 4))
names=("httpd --smp 1" "nginx, 1 worker" "httpd --smp 2" "nginx, 2 workers")
wrkcpu=("taskset -c 0" "taskset -c 0" "" "")

for i in 1 2 3 4; do # wait until each answers
	for _ in $(seq 100); do
		curl -fs "http://127.0.0.1:$((BASE_PORT + i))/" >/dev/null && break
		sleep 0.1
	done
	curl -fs "http://127.0.0.1:$((BASE_PORT + i))/" >/dev/null || { echo "posix-vs-nginx: ${names[i-1]} did not start" >&2; exit 1; }
done


load0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A rps cpu srv
for r in $(seq "$ROUNDS"); do
	for i in 1 2 3 4; do
		url="http://127.0.0.1:$((BASE_PORT + i))/"
		measure "${pids[i-1]}" "$url" ${wrkcpu[i-1]}
		[[ -z $errs ]] || echo "posix-vs-nginx: ${names[i-1]}: $errs" >&2
		rps[$i]+="$rate "
		cpu[$i]+="$us "
		srv[$i]+="$sus "
		echo "round $r: ${names[i-1]}: $rate req/s, $us CPU-µs/req, server process $sus CPU-µs/req" >&2
	done
done

echo
echo "load average before the run: $load0 (other work on the machine inflates CPU-µs/req)"
echo "wrk -t$THREADS -c$CONNS -d$DURATION, keep-alive, GET / (5-byte body), $ROUNDS interleaved rounds, medians"
echo
echo "| server | req/s | whole-machine CPU-µs/req | server-process CPU-µs/req |"
echo "|---|---:|---:|---:|"
for i in 1 2 3 4; do
	printf '| %s | %.0f | %s | %s |\n' "${names[i-1]}" "$(median <<<"${rps[$i]}")" "$(median <<<"${cpu[$i]}")" "$(median <<<"${srv[$i]}")"
done
