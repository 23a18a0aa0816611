#!/usr/bin/env bash
# wreck-vs-wrk.sh: is wreck at least as fast as wrk? Both drive one nginx worker
# (its own prefix in a temp dir, access_log off, pinned to SERVER_CPU) from
# CLIENT_CPU, keep-alive, same connections and duration, interleaved for ROUNDS
# rounds. Prints medians (min-max) of requests/s and of CPU-us per request:
# whole-machine busy time from /proc/stat, and the client's and server's own
# CPU time (steadier when other work shares the machine); and how often the
# client slept (voluntary context switches per request: each wake-up of a
# sleeping client costs the server a cross-CPU interrupt).
#
#   bench/wreck-vs-wrk.sh                 # 3 rounds, -c64, 5s
#   ROUNDS=5 CONNS=128 DUR=10 bench/wreck-vs-wrk.sh
#   PIPELINE=16 bench/wreck-vs-wrk.sh    # wrk pipelines through bench/wrk-pipeline.lua
#   BASE=main bench/wreck-vs-wrk.sh       # also wreck as of git revision BASE, as "base"
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
DUR=${DUR:-5}
PORT=${PORT:-18090}
PIPELINE=${PIPELINE:-1}
BASE=${BASE:-}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}

root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
need_tools wreck-vs-wrk "apt-get install -y wrk nginx util-linux time" wrk nginx taskset /usr/bin/time go

tmp=$(mktemp -d /tmp/wreck-vs-wrk.XXXXXX)
clean_on_exit "$tmp"

(cd "$root" && go build -o "$tmp/wreck" ./cmd/wreck)
clients=(wrk wreck)
if [[ -n $BASE ]]; then
	mkdir "$tmp/base-src"
	git -C "$root" archive "$BASE" | tar -x -C "$tmp/base-src"
	(cd "$tmp/base-src" && go build -o "$tmp/base" ./cmd/wreck)
	clients+=(base)
fi

mkdir -p "$tmp/logs"
cat >"$tmp/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
error_log $tmp/logs/error.log warn;
pid $tmp/nginx.pid;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 100000000;
	client_body_temp_path $tmp/body;
	proxy_temp_path $tmp/proxy;
	fastcgi_temp_path $tmp/fastcgi;
	uwsgi_temp_path $tmp/uwsgi;
	scgi_temp_path $tmp/scgi;
	server {
		listen 127.0.0.1:$PORT reuseport;
		location / { default_type text/plain; return 200 "Hello, World!"; }
	}
}
CONF
taskset -c "$SERVER_CPU" nginx -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/logs/error.log" &
nginx_pid=$!
pids+=("$nginx_pid")
for _ in $(seq 50); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
	sleep 0.1
done
kill -0 "$nginx_pid" 2>/dev/null || { echo "wreck-vs-wrk: nginx did not start: $(cat "$tmp/logs/error.log")" >&2; exit 1; }

wrk_args=() wrk_script_args=()
if ((PIPELINE > 1)); then
	wrk_args=(-s "$root/bench/wrk-pipeline.lua")
	wrk_script_args=(-- "$PIPELINE")
fi

hz=$(getconf CLK_TCK)
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }   # user nice system irq softirq steal
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }                  # utime + stime

url=http://127.0.0.1:$PORT/
run() { # tool round -> appends "tool rps machine_us procs_us client_us server_us sleeps" to results
	local tool=$1 out=$tmp/out b0 b1 s0 s1 reqs rps ut st vcs
	b0=$(busy)
	s0=$(ticks "$nginx_pid")
	case $tool in
	wrk) /usr/bin/time -f '%U %S %w' -o "$tmp/time" taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DUR}s" "${wrk_args[@]}" "$url" "${wrk_script_args[@]}" >"$out" ;;
	wreck | base) /usr/bin/time -f '%U %S %w' -o "$tmp/time" taskset -c "$CLIENT_CPU" "$tmp/$tool" --server "127.0.0.1:$PORT" --smp 1 --conn "$CONNS" --pipeline "$PIPELINE" --duration "${DUR}s" >"$out" 2>/dev/null ;;
	esac
	b1=$(busy)
	s1=$(ticks "$nginx_pid")
	reqs=$(awk '/requests in/{print $1; exit}' "$out")
	rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
	read -r ut st vcs <"$tmp/time"
	awk -v t="$tool" -v r="$rps" -v n="$reqs" -v db="$((b1 - b0))" -v ds="$((s1 - s0))" -v ut="$ut" -v st="$st" -v vcs="$vcs" -v hz="$hz" \
		'BEGIN { printf "%s %.0f %.2f %.2f %.2f %.2f %.4f\n", t, r, db*1e6/hz/n, (ds/hz+ut+st)*1e6/n, (ut+st)*1e6/n, ds/hz*1e6/n, vcs/n }' >>"$tmp/results"
	tail -1 "$tmp/results" | awk -v round="$2" '{ printf "round %d %-6s %9.0f req/s  us/req: %7.2f machine %6.2f client+server %6.2f client %6.2f server  client sleeps/req %.4f\n", round, $1, $2, $3, $4, $5, $6, $7 }' >&2
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
	for tool in "${clients[@]}"; do
		run "$tool" "$r"
	done
done

echo
echo "load average before/after: $load0 / $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nginx (1 worker, CPU $SERVER_CPU) <- client on CPU $CLIENT_CPU, $CONNS connections, keep-alive, pipeline $PIPELINE, ${DUR}s x $ROUNDS rounds, interleaved; median (min-max)${BASE:+; base: wreck at $(git -C "$root" rev-parse --short "$BASE")}"
echo
echo "| client | req/s | machine CPU-us/req | client+server CPU-us/req | client CPU-us/req | server CPU-us/req | client sleeps/req |"
echo "|---|---|---|---|---|---|---|"
for tool in "${clients[@]}"; do
	for col in 2 3 4 5 6 7; do
		awk -v t="$tool" -v c="$col" '$1 == t { print $c }' "$tmp/results" | sort -g |
			awk -v c="$col" '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; fmt = (c == 2) ? "%.0f (%.0f-%.0f)" : (c == 7) ? "%.3f (%.3f-%.3f)" : "%.2f (%.2f-%.2f)"; printf fmt "\n", m, v[1], v[NR] }' >"$tmp/col$col"
	done
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$tool" "$(cat "$tmp/col2")" "$(cat "$tmp/col3")" "$(cat "$tmp/col4")" "$(cat "$tmp/col5")" "$(cat "$tmp/col6")" "$(cat "$tmp/col7")"
done
