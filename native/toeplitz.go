package native

import (
	"encoding/binary"
	"unsafe"
)

// Software RSS: with fewer rx queues than shards, the shard that receives a
// TCP/IPv4 segment computes what a NIC's receive-side scaling would: the
// Toeplitz hash of the segment's 4-tuple (source address, destination
// address, source port, destination port, in network order) under a
// 40-byte key, whose low bits index an indirection table of shards. Every
// segment of a flow arrives with the same 4-tuple (we are its endpoint), so
// its SYN, its data and its FIN reach the same shard.

// fixedKey is the key of Microsoft's RSS verification suite ("Verifying the
// RSS Hash Calculation"), the default of several NIC drivers: the key used
// where the interface shows none (veth).
var fixedKey = [40]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// Toeplitz is the Toeplitz hash of data under key (len(key) >= len(data)+4),
// bit by bit: for each set input bit, the 32 key bits starting at it. It is
// the hash NICs use for RSS (Microsoft's "RSS hashing" specification).
func Toeplitz(key, data []byte) uint32 {
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

// tupleLen is the hashed input of TCP over IPv4: two addresses, two ports.
const tupleLen = 12

// flowHash is the Toeplitz hash of a 12-byte 4-tuple by table: the hash is
// linear in its input bits, so it is the XOR of each byte's contribution at
// its position, computed once per key (12 KiB). Read-only after newFlowHash.
type flowHash struct {
	t [tupleLen][256]uint32
}

func newFlowHash(key []byte) *flowHash {
	h := &flowHash{}
	var in [tupleLen]byte
	for i := range in {
		for b := range 256 {
			in[i] = byte(b)
			h.t[i][b] = Toeplitz(key, in[:])
		}
		in[i] = 0
	}
	return h
}

// sum hashes addrs (source then destination address, 8 bytes) and ports
// (source then destination port, 4 bytes), as they lie in the headers.
func (h *flowHash) sum(addrs, ports []byte) uint32 {
	_, _ = addrs[7], ports[3]
	return h.t[0][addrs[0]] ^ h.t[1][addrs[1]] ^ h.t[2][addrs[2]] ^ h.t[3][addrs[3]] ^
		h.t[4][addrs[4]] ^ h.t[5][addrs[5]] ^ h.t[6][addrs[6]] ^ h.t[7][addrs[7]] ^
		h.t[8][ports[0]] ^ h.t[9][ports[1]] ^ h.t[10][ports[2]] ^ h.t[11][ports[3]]
}

// The ethtool ioctl for the RSS hash key (linux/ethtool.h): struct
// ethtool_rxfh is {cmd, rss_context, indir_size, key_size uint32; hfunc,
// input_xfrm uint8; rsvd8 [2]uint8; rsvd32 uint32} then the table and the
// key; a get with both sizes 0 returns the sizes, one with indir_size 0 and
// key_size set returns the key alone.
const (
	ethtoolGRSSH   = 0x46
	rxfhHeader     = 24
	ethRSSHashTop  = 1 << 0 // hfunc: Toeplitz
	maxRSSKeyBytes = 256
)

// readRSSKey reads iface's RSS key where the driver shows one and hashes
// with Toeplitz; else (veth has no RSS, or another hash function) it
// returns nil and why.
func readRSSKey(iface string) ([]byte, string) {
	var head [rxfhHeader / 4]uint32
	head[0] = ethtoolGRSSH
	if err := ethtoolIoctl(iface, head[:]); err != nil {
		return nil, "the driver shows none"
	}
	size := int(head[3])
	hfunc := uint8(head[4])
	switch {
	case size < tupleLen+4 || size > maxRSSKeyBytes:
		return nil, "the driver shows none"
	case hfunc != 0 && hfunc&ethRSSHashTop == 0:
		return nil, "the NIC's hash is not Toeplitz"
	}
	buf := make([]uint32, (rxfhHeader+size+3)/4)
	buf[0], buf[3] = ethtoolGRSSH, uint32(size)
	if err := ethtoolIoctl(iface, buf); err != nil {
		return nil, "the driver shows none"
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*4)
	return append([]byte(nil), b[rxfhHeader:rxfhHeader+size]...), ""
}
