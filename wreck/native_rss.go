package wreck

import (
	"encoding/binary"
	"errors"
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

// toeplitz is the Toeplitz hash of data under key (len(key) >= len(data)+4).
func toeplitz(key, data []byte) uint32 {
	var h uint32
	v := binary.BigEndian.Uint32(key) // the 32 key bits aligned with the next input bit
	for i, b := range data {
		next := key[i+4]
		for bit := 7; bit >= 0; bit-- {
			if b&(1<<bit) != 0 {
				h ^= v
			}
			v = v<<1 | uint32(next>>bit&1)
		}
	}
	return h
}

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
	h := toeplitz(key, in[:])
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

// openQueue opens shard id's queue: its own rx queue, or, forwarded and
// owning none, the stack the queues' owners forward to.
func openQueue(dev *native.Device, id int, qc native.QueueConfig) (*native.Queue, error) {
	if len(dev.Owned(id)) == 0 {
		return dev.NewForwarded(id, qc)
	}
	return dev.NewQueue(id, qc)
}
