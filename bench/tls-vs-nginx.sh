#!/usr/bin/env bash
# tls-vs-nginx.sh: HTTPS on one core, percore's httpd (posix stack, --smp 1)
# beside nginx (one worker), the same ECDSA P-256 certificate, TLS 1.3 with
# TLS_AES_128_GCM_SHA256 and X25519 (wreck offers it alone: Go would offer
# its post-quantum hybrid first, which nginx on OpenSSL 3.0 lacks), both
# pinned to CPU 1 and wreck --tls on CPU 0,
# over loopback; the servers interleaved in each round, medians over the
# rounds. Rows: full handshakes/s (--keepalive=false, a request each),
# resumed handshakes/s (the same with --tls-resume), keep-alive requests/s,
# and the server process's CPU-µs per handshake or request (utime+stime of
# the server and its children, which other work on the machine does not
# inflate). Prints a markdown table.
#
#   bench/tls-vs-nginx.sh            # 3 rounds of 5 s per server and mode
#   ROUNDS=5 DURATION=10s CONNS=64 bench/tls-vs-nginx.sh
#
# Everything it starts is stopped by pid; its files live in one temp dir.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-32}
BASE_PORT=${BASE_PORT:-18440}

cd "$(dirname "$0")/.."
source bench/lib.sh
need_tools tls-vs-nginx "apt-get install nginx openssl jq" nginx openssl jq taskset go
need_cpus tls-vs-nginx 2 "server and client on separate cores"

dir=$(mktemp -d /tmp/percore-tls.XXXXXX)
clean_on_exit "$dir"
go build -o "$dir/httpd" ./cmd/httpd
go build -o "$dir/wreck" ./cmd/wreck

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=percore bench" \
	-addext "subjectAltName=IP:127.0.0.1" -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

mkdir -p "$dir/nginx/logs"
cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity 10;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $dir/nginx/body; proxy_temp_path $dir/nginx/proxy; fastcgi_temp_path $dir/nginx/fastcgi;
	uwsgi_temp_path $dir/nginx/uwsgi; scgi_temp_path $dir/nginx/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$((BASE_PORT + 2)) ssl reuseport;
		ssl_certificate $dir/cert.pem;
		ssl_certificate_key $dir/key.pem;
		ssl_protocols TLSv1.3;
		ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
		ssl_session_tickets on;
		location = / { default_type text/plain; return 200 "hello"; }
	}
}
CONF
taskset -c 1 "$dir/httpd" --smp 1 --cpuset 1 --address 127.0.0.1 --port $((BASE_PORT + 1)) \
	--tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem" 2>"$dir/httpd.log" &
pids+=($!)
taskset -c 1 nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
names=("percore httpd --smp 1" "nginx, 1 worker")

for i in 1 2; do # wait until each answers
	for _ in $(seq 100); do
		curl -fsk "https://127.0.0.1:$((BASE_PORT + i))/" >/dev/null && break
		sleep 0.1
	done
	curl -fsk "https://127.0.0.1:$((BASE_PORT + i))/" >/dev/null || { echo "tls-vs-nginx: ${names[i-1]} did not start" >&2; exit 1; }
	# Both must settle on TLS 1.3 with AES-128-GCM.
	suite=$(openssl s_client -connect "127.0.0.1:$((BASE_PORT + i))" -tls1_3 </dev/null 2>/dev/null | awk '/Cipher is/{print $NF}')
	[[ $suite == TLS_AES_128_GCM_SHA256 ]] || { echo "tls-vs-nginx: ${names[i-1]} negotiated $suite" >&2; exit 1; }
done

# run I MODE: one wreck run against server I; sets rate (handshakes or
# requests per second), sus (server CPU-µs per handshake or request) and errs.
run() {
	local i=$1 mode=$2 hz p0 p1 out n args=()
	hz=$(getconf CLK_TCK)
	case $mode in
	full) args=(--keepalive=false) ;;
	resumed) args=(--keepalive=false --tls-resume) ;;
	keepalive) args=() ;;
	esac
	p0=$(proccpu "${pids[i-1]}")
	out=$(taskset -c 0 "$dir/wreck" --server "127.0.0.1:$((BASE_PORT + i))" --tls --tls-ca "$dir/cert.pem" \
		--tls-curves x25519 --conn "$CONNS" --duration "$DURATION" --json "${args[@]}" 2>/dev/null)
	p1=$(proccpu "${pids[i-1]}")
	n=$(jq -r '.requests' <<<"$out")
	rate=$(jq -r '.req_per_sec' <<<"$out")
	errs=$(jq -r '.errors | [.malformed, .timeout, .reset, .closed, .connect] | add' <<<"$out")
	if [[ $mode == resumed ]]; then # each connection slot's first handshake is a full one
		[[ $(jq -r '.tls.resumed' <<<"$out") -ge $((n - CONNS)) ]] || errs="$errs, not resumed"
	fi
	sus=$(awk -v b="$((p1 - p0))" -v n="$n" -v hz="$hz" 'BEGIN{printf "%.1f", b*1e6/hz/n}')
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
modes=(full resumed keepalive)
declare -A rps cpu
for r in $(seq "$ROUNDS"); do
	for m in "${modes[@]}"; do
		for i in 1 2; do
			run "$i" "$m"
			[[ $errs == 0 ]] || echo "tls-vs-nginx: ${names[i-1]} $m: errors $errs" >&2
			rps[$i$m]+="$rate "
			cpu[$i$m]+="$sus "
			echo "round $r: ${names[i-1]}: $m: $rate/s, server $sus CPU-µs each" >&2
		done
	done
done

echo
echo "load average before the run: $load0"
echo "wreck --tls --tls-curves x25519 --conn $CONNS --duration $DURATION on CPU 0, servers on CPU 1; TLS 1.3, TLS_AES_128_GCM_SHA256, X25519, ECDSA P-256; $ROUNDS interleaved rounds, medians"
echo "a handshake row's figures include its one request; CPU-µs: the server process, every thread"
echo
echo "| server | full handshakes/s | CPU-µs/handshake | resumed/s | CPU-µs/resumed | keep-alive req/s | CPU-µs/req |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for i in 1 2; do
	printf '| %s | %.0f | %s | %.0f | %s | %.0f | %s |\n' "${names[i-1]}" \
		"$(median <<<"${rps[${i}full]}")" "$(median <<<"${cpu[${i}full]}")" \
		"$(median <<<"${rps[${i}resumed]}")" "$(median <<<"${cpu[${i}resumed]}")" \
		"$(median <<<"${rps[${i}keepalive]}")" "$(median <<<"${cpu[${i}keepalive]}")"
done
