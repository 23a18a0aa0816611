package netstack

import "encoding/binary"

// ARP packet for Ethernet and IPv4 (RFC 826):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Hardware Type (1)        |     Protocol Type (0x0800)    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  HLen (6)     |  PLen (4)     |          Operation            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Sender Hardware Address (bytes 0-3)             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Sender HW Address (4-5)      |  Sender Protocol Addr (0-1)   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Sender Protocol Addr (2-3)   |  Target HW Address (0-1)      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Target Hardware Address (bytes 2-5)             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               Target Protocol Address                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	arpHType = 0
	arpPType = 2
	arpHLen  = 4
	arpPLen  = 5
	arpOp    = 6
	arpSHA   = 8
	arpSPA   = 14
	arpTHA   = 18
	arpTPA   = 24

	// ARPLen is the length of an Ethernet/IPv4 ARP packet.
	ARPLen = 28
)

// ARP operations.
const (
	ARPRequest = 1
	ARPReply   = 2
)

// ARP is a view over an ARP packet. Valid accepts only the Ethernet/IPv4 form,
// so the fixed offsets above hold; after Valid returns true no accessor can
// panic. The view aliases its buffer.
type ARP []byte

// Valid reports whether a is at least ARPLen long and is Ethernet/IPv4 ARP.
func (a ARP) Valid() bool {
	return len(a) >= ARPLen &&
		binary.BigEndian.Uint16(a[arpHType:]) == 1 &&
		binary.BigEndian.Uint16(a[arpPType:]) == EtherTypeIPv4 &&
		a[arpHLen] == 6 && a[arpPLen] == 4
}

// Op returns the operation (ARPRequest, ARPReply, or another value).
func (a ARP) Op() uint16 { return binary.BigEndian.Uint16(a[arpOp:]) }

// SenderMAC returns the sender hardware address.
func (a ARP) SenderMAC() MAC { return MAC(a[arpSHA : arpSHA+6]) }

// SenderIP returns the sender protocol address.
func (a ARP) SenderIP() IPv4Addr { return IPv4Addr(a[arpSPA : arpSPA+4]) }

// TargetMAC returns the target hardware address.
func (a ARP) TargetMAC() MAC { return MAC(a[arpTHA : arpTHA+6]) }

// TargetIP returns the target protocol address.
func (a ARP) TargetIP() IPv4Addr { return IPv4Addr(a[arpTPA : arpTPA+4]) }

// ARPFields are the fields of an Ethernet/IPv4 ARP packet, for building one.
type ARPFields struct {
	Op                   uint16
	SenderMAC, TargetMAC MAC
	SenderIP, TargetIP   IPv4Addr
}

// Encode writes the packet into b[:ARPLen]; b must be at least that long.
func (f *ARPFields) Encode(b []byte) {
	_ = b[ARPLen-1]
	binary.BigEndian.PutUint16(b[arpHType:], 1)
	binary.BigEndian.PutUint16(b[arpPType:], EtherTypeIPv4)
	b[arpHLen] = 6
	b[arpPLen] = 4
	binary.BigEndian.PutUint16(b[arpOp:], f.Op)
	copy(b[arpSHA:], f.SenderMAC[:])
	copy(b[arpSPA:], f.SenderIP[:])
	copy(b[arpTHA:], f.TargetMAC[:])
	copy(b[arpTPA:], f.TargetIP[:])
}
