package netstack

import "encoding/binary"

// Ethernet II frame header (IEEE 802.3, "DIX" framing):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination MAC Address                    |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                      Source MAC Address                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           EtherType           |  Payload ...
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// No VLAN tags: a tagged frame has EtherType 0x8100 and is dropped as unknown.
const (
	ethDst  = 0
	ethSrc  = 6
	ethType = 12

	// EthernetHeaderLen is the length of an untagged Ethernet II header.
	EthernetHeaderLen = 14
)

// EtherType values the stack handles.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
)

// Ethernet is a view over an Ethernet II frame. Call Valid once; after it
// returns true no accessor can panic. The view aliases the buffer it was made
// from and is valid only as long as that buffer is (an rx frame until RxDone).
type Ethernet []byte

// Valid reports whether e is long enough to hold the header.
func (e Ethernet) Valid() bool { return len(e) >= EthernetHeaderLen }

// Dst returns the destination address.
func (e Ethernet) Dst() MAC { return MAC(e[ethDst : ethDst+6]) }

// Src returns the source address.
func (e Ethernet) Src() MAC { return MAC(e[ethSrc : ethSrc+6]) }

// Type returns the EtherType.
func (e Ethernet) Type() uint16 { return binary.BigEndian.Uint16(e[ethType:]) }

// Payload returns the bytes after the header (including any link padding).
func (e Ethernet) Payload() []byte { return e[EthernetHeaderLen:] }

// SetDst sets the destination address.
func (e Ethernet) SetDst(m MAC) { copy(e[ethDst:], m[:]) }

// SetSrc sets the source address.
func (e Ethernet) SetSrc(m MAC) { copy(e[ethSrc:], m[:]) }

// EthernetFields are the header fields, for building frames.
type EthernetFields struct {
	Dst, Src MAC
	Type     uint16
}

// Encode writes the header into b[:EthernetHeaderLen]; b must be at least that
// long.
func (f *EthernetFields) Encode(b []byte) {
	_ = b[EthernetHeaderLen-1]
	copy(b[ethDst:], f.Dst[:])
	copy(b[ethSrc:], f.Src[:])
	binary.BigEndian.PutUint16(b[ethType:], f.Type)
}
