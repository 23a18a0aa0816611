package wreck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"percore/native"
	"percore/netstack"
)

// Receive-side scaling on a real NIC: the NIC hashes each received TCP/IPv4
// frame's 4-tuple with the Toeplitz function under its key, and the low bits
// of the hash index an indirection table of queues. A native client shard
// must receive its replies on its own queue, so it opens connections only
// from source ports whose replies (server -> us) hash to it, as Seastar's
// connect() does. On veth there is no RSS: a reply comes back on the queue
// the request left from, and no filter is needed.

// rssQueue is the rx queue a NIC with key and an indirection table of
// table entries (entry i -> queue i % queues, ethtool -X equal) picks for a
// TCP/IPv4 frame from src to dst.
func rssQueue(key []byte, table, queues int, src, dst netip.AddrPort) int {
	var in [12]byte
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(in[0:4], s[:])
	copy(in[4:8], d[:])
	binary.BigEndian.PutUint16(in[8:], src.Port())
	binary.BigEndian.PutUint16(in[10:], dst.Port())
	h := native.Toeplitz(key, in[:])
	return int(h%uint32(table)) % queues
}

// rssPortFilter keeps the source ports whose replies from server to local
// land on queue. Called by the TCP layer when it picks a port for a
// connect, not per packet.
func rssPortFilter(key []byte, table, queues, queue int, server netip.AddrPort, local netip.Addr) func(uint16) bool {
	key = append([]byte(nil), key...)
	return func(port uint16) bool {
		return rssQueue(key, table, queues, server, netip.AddrPortFrom(local, port)) == queue
	}
}

// Software forwarding (fewer rx queues than shards): the shards that own a
// queue hash each reply's flow and hand it to the shard that flow belongs
// to (native.Device.FlowShard). Each shard then takes source ports from the
// whole range, keeping those whose replies forwarding gives it, whatever
// queue the NIC puts them on; the hash replaces any --rss-key filter.

// forwarded sets tc's ports and filter for shard when dev forwards; it
// leaves tc alone when it does not. The filter sees a port, not its address,
// so forwarding takes one source address.
func forwarded(dev *native.Device, shard int, server netip.AddrPort, n *NativeConfig, tc *netstack.TCPConfig) error {
	local := netip.AddrPortFrom(n.Addr, n.PortLo)
	if dev.FlowShard(server, local) < 0 {
		return nil
	}
	if len(n.Aliases) > 0 {
		return errors.New("fewer rx queues than shards: forwarding picks source ports for one --host-ipv4-addr, not several")
	}
	tc.PortLo, tc.PortHi = n.PortLo, n.PortHi
	tc.PortFilter = func(port uint16) bool {
		return dev.FlowShard(server, netip.AddrPortFrom(n.Addr, port)) == shard
	}
	return nil
}

// shardQueues is the rx queues shard i runs a stack on, as the server's
// shards do (native.Device.Owned): its own, several where the NIC has more
// queues than shards and no indirection table to program (native.RSSQueues:
// i, i+shards, ...), or, forwarded and owning none, -1: the stack the
// queues' owners forward to.
func shardQueues(dev *native.Device, i int) []int {
	if qs := dev.Owned(i); len(qs) > 0 {
		return qs
	}
	return []int{-1}
}

// openQueue opens shard's stack on rx queue q (shardQueues).
func openQueue(dev *native.Device, shard, q int, qc native.QueueConfig) (*native.Queue, error) {
	if q < 0 {
		return dev.NewForwarded(shard, qc)
	}
	return dev.NewQueue(q, qc)
}

// rssSpread is how the NIC deals the replies over its rx queues: it hashes
// them under key and entry i of an indirection table of table entries
// holds queue i % queues (the drivers' default table, and ethtool -X
// equal's). A nil key: no filter. veth has no RSS and brings each reply
// back on the queue its request left from.
type rssSpread struct {
	key           []byte
	table, queues int
}

// nicSpread is the spread each stack filters its source ports by: with
// --rss-key (and --rss-table) the user's, else the NIC's own key and table
// where the driver shows them; none with a single queue or software
// forwarding (forwarded filters by the forwarding hash).
func nicSpread(dev *native.Device, n *NativeConfig, smp int, server netip.AddrPort) (rssSpread, error) {
	queues := dev.RxQueues()
	if dev.RSS() == native.RSSIndir {
		queues = smp // Open pointed the table at queues 0..smp-1
	}
	if queues <= 1 || dev.FlowShard(server, netip.AddrPortFrom(n.Addr, n.PortLo)) >= 0 {
		return rssSpread{}, nil
	}
	key, table := n.RSSKey, n.RSSTable
	if key == nil {
		key, table = dev.RSSKey(), dev.RSSTableSize()
	}
	severalQueues := dev.RSS() == native.RSSQueues && queues > smp
	switch {
	case key != nil && table > 0 && len(n.Aliases) > 0 && len(n.RSSKey) == 0:
		return rssSpread{}, fmt.Errorf("%s hashes replies over %d rx queues: the source port filter takes one --host-ipv4-addr, not several", n.Iface, queues)
	case key != nil && table > 0:
		return rssSpread{key: key, table: table, queues: queues}, nil
	case severalQueues && dev.RSSTableSize() > 0:
		return rssSpread{}, fmt.Errorf("%s spreads replies over %d rx queues and shows no Toeplitz RSS key: give --rss-key (ethtool -x %s)", n.Iface, queues, n.Iface)
	}
	return rssSpread{queues: queues}, nil
}

// stackPorts sets tc's source ports and filter for shard's stack on rx
// queue q, the j-th of the k it runs: filtered by the spread's key, the
// whole range, keeping the ports whose replies the NIC puts on q; without a
// key, the shard's slice of the range cut k ways.
func stackPorts(n *NativeConfig, rss rssSpread, shard, shards, j, k, q int, server netip.AddrPort, tc *netstack.TCPConfig) error {
	if rss.key != nil {
		tc.PortLo, tc.PortHi = n.PortLo, n.PortHi
		tc.PortFilter = rssPortFilter(rss.key, rss.table, rss.queues, q, server, n.Addr)
		return nil
	}
	lo, hi := n.shardPorts(shard, shards)
	per := (int(hi-lo) + 1) / k
	if per == 0 {
		return badField("Native.PortLo..PortHi", "%d-%d: too few for %d shards of %d queues each", n.PortLo, n.PortHi, shards, k)
	}
	tc.PortLo = lo + uint16(j*per)
	tc.PortHi = tc.PortLo + uint16(per-1)
	return nil
}
