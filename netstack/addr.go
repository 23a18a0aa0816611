package netstack

import "net/netip"

// IPv4Addr is an IPv4 address in network byte order, as it sits in a header.
//
// A plain array: comparable with ==, usable as a map key, copied by value, and
// read from or written to a header with one 4-byte copy. The data path uses it
// instead of netip.Addr, whose 16-byte-plus-zone form costs a conversion per
// packet; convert at the edges with AsNetip and IPv4AddrFrom.
type IPv4Addr [4]byte

// Well-known IPv4 addresses.
var (
	IPv4Zero      = IPv4Addr{}
	IPv4Broadcast = IPv4Addr{255, 255, 255, 255}
)

// IPv4AddrFrom converts a (possibly 4-in-6) netip.Addr; ok is false when a is
// not an IPv4 address.
func IPv4AddrFrom(a netip.Addr) (IPv4Addr, bool) {
	a = a.Unmap()
	if !a.Is4() {
		return IPv4Addr{}, false
	}
	return IPv4Addr(a.As4()), true
}

// AsNetip returns a as a netip.Addr.
func (a IPv4Addr) AsNetip() netip.Addr { return netip.AddrFrom4(a) }

// Uint32 returns a as a host-order integer (for masks and hashing).
func (a IPv4Addr) Uint32() uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// IPv4AddrFromUint32 is the inverse of Uint32.
func IPv4AddrFromUint32(v uint32) IPv4Addr {
	return IPv4Addr{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// String formats a in dotted-quad form (not for per-packet use).
func (a IPv4Addr) String() string { return a.AsNetip().String() }

// MAC is an Ethernet hardware address, comparable and copied by value.
type MAC [6]byte

// Well-known MAC addresses.
var (
	MACZero      = MAC{}
	MACBroadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// IsMulticast reports whether the group bit is set (broadcast included).
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }

// String formats m as aa:bb:cc:dd:ee:ff (not for per-packet use).
func (m MAC) String() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, v := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[v>>4], hex[v&0xf])
	}
	return string(b)
}
