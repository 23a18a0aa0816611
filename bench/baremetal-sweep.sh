#!/usr/bin/env bash
# baremetal-sweep.sh: the per-core scaling sweep on a real NIC, the way
# Seastar's published httpd table was measured: percore (native and posix),
# nginx, fasthttp and gnet on this machine's NIC, the load (wreck and wrk) from
# a second machine over ssh. Prepare both machines as docs/tuning.md says
# first (queues, IRQ affinity, irqbalance off, NUMA, governor, memlock).
#
#   IFACE=eth2 SERVER_IP=198.18.0.1 CLIENT=root@loadgen bench/baremetal-sweep.sh
#   IFACE=eth2 SERVER_IP=198.18.0.1 CLIENT=root@loadgen SMP=2,4,8,16,24,28,32 \
#     ROUNDS=3 DURATION=10s PIPELINE=1,16 CONN=1024 CLIENT_THREADS=32 OUT=docs/benchmarks.md bench/baremetal-sweep.sh
#   IFACE=eth2 SERVER_IP=198.18.0.1 CLIENT=root@loadgen CLIENT_IFACE=eth2 CLIENT_NATIVE_IP=198.18.0.3 bench/baremetal-sweep.sh
#
# CLIENT_IFACE and CLIENT_NATIVE_IP add wreck-native, percore's kernel-bypass
# client (as seawreck on Seastar's native stack), on the client machine's NIC
# with an address no interface there holds; the sweep reads that NIC's RSS
# key and table size there (ethtool -x) so that each client shard picks
# source ports whose replies hash to its own queue. The client machine then
# needs ethtool and at least CLIENT_THREADS queues on CLIENT_IFACE.
#
# Run as root on the server machine, from the repository. It needs go, ethtool
# and nginx here, and wrk on the client (ssh as root without a
# password prompt, e.g. a key in ssh-agent). SERVER_IP must be configured on
# IFACE (`ip addr add 198.18.0.1/24 dev eth2`) for the kernel-stack servers;
# the native stack's XDP program takes the TCP frames for its own port before
# the kernel sees them, so both coexist. The client must reach SERVER_IP
# through IFACE (same L2 segment, or give the native stack a gateway).
#
# CPUS defaults to the CPUs of the NIC's NUMA node (shards on the NIC's
# socket); k shards take the first k of them, one thread of every physical
# core before any second thread. Before each shard count k the sweep sets
# `ethtool -X IFACE default` and `ethtool -L IFACE combined k` and points
# queue q's interrupt at the CPU of shard q, again after each server starts
# (i40e resets them on every XDP attach) (unless SET_CHANNELS=0 /
# IRQ_AFFINITY=0).
#
# percore native busy-polls (--busy-poll $BUSY_POLL, 0: off): the shards'
# system calls run the NIC queues' NAPI poll. For that the sweep sets IFACE's
# napi_defer_hard_irqs to 2 and gro_flush_timeout to 200000 ns (DPDK's AF_XDP
# guide's values) and puts the old values back on exit.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

: "${IFACE:?set IFACE, the NIC to serve on (e.g. eth2)}"
: "${SERVER_IP:?set SERVER_IP, the IPv4 address of this machine on IFACE}"
: "${CLIENT:?set CLIENT, the ssh destination of the client machine (e.g. root@loadgen)}"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
PIPELINE=${PIPELINE:-1,16}
CONN=${CONN:-1024}
SERVERS=${SERVERS:-native,posix,nginx,fasthttp,gnet}
OUT=${OUT:-bench/out/baremetal.md}
SVG=${SVG:-bench/out/baremetal.svg}
SET_CHANNELS=${SET_CHANNELS:-1}
IRQ_AFFINITY=${IRQ_AFFINITY:-1}
BUSY_POLL=${BUSY_POLL:-64}
NAPI_DEFER_HARD_IRQS=${NAPI_DEFER_HARD_IRQS:-2}
GRO_FLUSH_TIMEOUT=${GRO_FLUSH_TIMEOUT:-200000}

((EUID == 0)) || { echo "baremetal-sweep: run as root (XDP, ethtool -L, IRQ affinity)" >&2; exit 2; }
for tool in go ethtool nginx ssh scp; do
	command -v "$tool" >/dev/null || { echo "baremetal-sweep: $tool not found here" >&2; exit 2; }
done
[[ -d /sys/class/net/$IFACE ]] || { echo "baremetal-sweep: no interface $IFACE (see ip link)" >&2; exit 2; }
ip -4 addr show dev "$IFACE" | grep -q "inet $SERVER_IP/" ||
	{ echo "baremetal-sweep: $SERVER_IP is not on $IFACE: ip addr add $SERVER_IP/24 dev $IFACE" >&2; exit 2; }

cd "$(dirname "$0")/.."

# Shards on the NIC's NUMA node.
node=$(cat "/sys/class/net/$IFACE/device/numa_node" 2>/dev/null || echo -1)
if [[ -z ${CPUS:-} ]]; then
	if ((node >= 0)); then
		CPUS=$(cat "/sys/devices/system/node/node$node/cpulist")
	else
		CPUS=0-$(($(nproc) - 1))
	fi
fi
ncpus=$(tr ',' '\n' <<<"$CPUS" | awk -F- '{n += ($2 == "" ? 1 : $2 - $1 + 1)} END {print n}')
SMP=${SMP:-}
if [[ -z $SMP ]]; then # Seastar's points that fit, plus 1
	SMP=1
	for k in 2 4 8 16 24 28 32; do ((k <= ncpus)) && SMP+=",$k"; done
fi

driver=$(ethtool -i "$IFACE" | awk '/^driver:/{print $2}')
echo "baremetal-sweep: $IFACE driver $driver, NUMA node $node, shard CPUs $CPUS, smp $SMP" >&2
case $driver in
i40e | ice | mlx5_core | ixgbe | igc | virtio_net) ;;
*) echo "baremetal-sweep: $driver has no AF_XDP zero-copy support known to percore; the native stack will run in copy mode" >&2 ;;
esac
if pgrep -x irqbalance >/dev/null; then
	echo "baremetal-sweep: irqbalance is running and will move the queue interrupts: systemctl stop irqbalance" >&2
	exit 2
fi

# Everything changed here is put back on exit, however the sweep ends.
tmp=$(mktemp -d /tmp/baremetal-sweep.XXXXXX)
sysnet=/sys/class/net/$IFACE
restore=("rm -rf $tmp")
trap 'for c in "${restore[@]}"; do eval "$c" || true; done' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Preferred busy polling: the interrupt stays masked for NAPI_DEFER_HARD_IRQS
# polls that find nothing, and the kernel polls the queue itself
# GRO_FLUSH_TIMEOUT ns after the shard last did (so a sleeping shard still
# gets its frames).
if ((BUSY_POLL > 0)); then
	for knob in napi_defer_hard_irqs gro_flush_timeout; do
		restore+=("echo $(cat "$sysnet/$knob") >$sysnet/$knob")
	done
	echo "$NAPI_DEFER_HARD_IRQS" >"$sysnet/napi_defer_hard_irqs"
	echo "$GRO_FLUSH_TIMEOUT" >"$sysnet/gro_flush_timeout"
	echo "baremetal-sweep: busy polling, budget $BUSY_POLL: $IFACE napi_defer_hard_irqs $NAPI_DEFER_HARD_IRQS, gro_flush_timeout $GRO_FLUSH_TIMEOUT ns (restored on exit)" >&2
fi

# The client gets wreck (built here, same architecture assumed) and the wrk
# pipelining script.
go build -o "$tmp/wreck" ./cmd/wreck
scp -q "$tmp/wreck" "$CLIENT:/tmp/percore-wreck"
scp -q bench/wrk-pipeline.lua "$CLIENT:/tmp/wrk-pipeline.lua"
client_threads=${CLIENT_THREADS:-$(ssh "$CLIENT" nproc)}
ssh "$CLIENT" 'command -v wrk >/dev/null' ||
	{ echo "baremetal-sweep: the client needs wrk: ssh $CLIENT apt-get install -y wrk" >&2; exit 2; }

flags=(--iface "$IFACE" --host-ipv4-addr "$SERVER_IP" --cpuset "$CPUS" --smp "$SMP"
	--client-exec "ssh $CLIENT" --client-threads "$client_threads"
	--client-wreck /tmp/percore-wreck --client-wrk-script /tmp/wrk-pipeline.lua
	--rounds "$ROUNDS" --duration "$DURATION" --pipeline "$PIPELINE" --conn "$CONN"
	--servers "$SERVERS" --out "$OUT" --svg "$SVG" --json "${OUT%.md}.json" --busy-poll "$BUSY_POLL")
((SET_CHANNELS)) && flags+=(--set-channels)
((IRQ_AFFINITY)) && flags+=(--irq-affinity)
if [[ -n ${CLIENT_IFACE:-} ]]; then
	: "${CLIENT_NATIVE_IP:?set CLIENT_NATIVE_IP, the address of wreck-native on CLIENT_IFACE (one no interface there holds)}"
	flags+=(--client-iface "$CLIENT_IFACE" --client-ipv4-addr "$CLIENT_NATIVE_IP")
fi
# go run's child gets SIGINT from the terminal's process group; it stops
# every server it started before it exits, and then the traps above restore.
go run ./cmd/bench sweep "${flags[@]}"
