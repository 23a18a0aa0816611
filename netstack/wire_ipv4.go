package netstack

import "encoding/binary"

// IPv4 header (RFC 791 section 3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Flags: bit 0 reserved (must be zero), bit 1 DF (don't fragment), bit 2 MF
// (more fragments); the fragment offset counts 8-byte units.
const (
	ipVerIHL    = 0
	ipTOS       = 1
	ipTotalLen  = 2
	ipID        = 4
	ipFlagsFrag = 6
	ipTTL       = 8
	ipProto     = 9
	ipChecksum  = 10
	ipSrc       = 12
	ipDst       = 16

	// IPv4MinHeaderLen is the length of a header without options.
	IPv4MinHeaderLen = 20
	// IPv4MaxHeaderLen is the longest header IHL can describe.
	IPv4MaxHeaderLen = 60
)

// Bits of the 16-bit flags/fragment-offset word.
const (
	IPv4FlagReserved = 0x8000
	IPv4FlagDF       = 0x4000
	IPv4FlagMF       = 0x2000
	ipv4FragOffMask  = 0x1fff
)

// IP protocol numbers.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// IPv4Status is the result of IPv4.Check: why a header is unusable, or
// IPv4OK. The stack counts each non-OK value in its own counter.
type IPv4Status uint8

const (
	IPv4OK           IPv4Status = iota
	IPv4Truncated               // shorter than 20 bytes, than IHL, or than Total Length
	IPv4BadVersion              // version is not 4
	IPv4BadHeaderLen            // IHL < 5
	IPv4BadTotalLen             // Total Length < IHL*4
)

// IPv4 is a view over an IPv4 packet. Call Valid (or Check) once; after it
// succeeds no accessor can panic, and Payload ends at Total Length, so link
// padding is cut off. The view aliases its buffer.
type IPv4 []byte

// Check validates the fixed header, IHL and Total Length against the buffer.
// It does not verify the checksum (see HeaderChecksumOK) or the options.
func (ip IPv4) Check() IPv4Status {
	if len(ip) < IPv4MinHeaderLen {
		return IPv4Truncated
	}
	if ip[ipVerIHL]>>4 != 4 {
		return IPv4BadVersion
	}
	hl := int(ip[ipVerIHL]&0xf) * 4
	if hl < IPv4MinHeaderLen {
		return IPv4BadHeaderLen
	}
	tl := int(binary.BigEndian.Uint16(ip[ipTotalLen:]))
	if tl < hl {
		return IPv4BadTotalLen
	}
	if hl > len(ip) || tl > len(ip) {
		return IPv4Truncated
	}
	return IPv4OK
}

// Valid reports whether Check returns IPv4OK.
func (ip IPv4) Valid() bool { return ip.Check() == IPv4OK }

// HeaderLen returns IHL in bytes.
func (ip IPv4) HeaderLen() int { return int(ip[ipVerIHL]&0xf) * 4 }

// TOS returns the type-of-service (DSCP and ECN) byte.
func (ip IPv4) TOS() uint8 { return ip[ipTOS] }

// TotalLen returns the Total Length field.
func (ip IPv4) TotalLen() int { return int(binary.BigEndian.Uint16(ip[ipTotalLen:])) }

// ID returns the identification field.
func (ip IPv4) ID() uint16 { return binary.BigEndian.Uint16(ip[ipID:]) }

// Flags returns the flag bits (IPv4FlagDF, IPv4FlagMF, IPv4FlagReserved).
func (ip IPv4) Flags() uint16 { return binary.BigEndian.Uint16(ip[ipFlagsFrag:]) &^ ipv4FragOffMask }

// FragOffset returns the fragment offset in bytes.
func (ip IPv4) FragOffset() int {
	return int(binary.BigEndian.Uint16(ip[ipFlagsFrag:])&ipv4FragOffMask) * 8
}

// IsFragment reports whether the packet is part of a fragmented datagram
// (MF set or a non-zero offset).
func (ip IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(ip[ipFlagsFrag:])&(IPv4FlagMF|ipv4FragOffMask) != 0
}

// TTL returns the time to live.
func (ip IPv4) TTL() uint8 { return ip[ipTTL] }

// Protocol returns the payload protocol number.
func (ip IPv4) Protocol() uint8 { return ip[ipProto] }

// Checksum returns the header checksum field.
func (ip IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(ip[ipChecksum:]) }

// HeaderChecksumOK reports whether the header (options included) sums to zero.
func (ip IPv4) HeaderChecksumOK() bool { return Checksum(ip[:ip.HeaderLen()]) == 0 }

// Src returns the source address.
func (ip IPv4) Src() IPv4Addr { return IPv4Addr(ip[ipSrc : ipSrc+4]) }

// Dst returns the destination address.
func (ip IPv4) Dst() IPv4Addr { return IPv4Addr(ip[ipDst : ipDst+4]) }

// Options returns the option bytes (empty without options).
func (ip IPv4) Options() []byte { return ip[IPv4MinHeaderLen:ip.HeaderLen()] }

// Payload returns the bytes after the header up to Total Length.
func (ip IPv4) Payload() []byte { return ip[ip.HeaderLen():ip.TotalLen()] }

// IPv4OptionsValid reports whether opts is a well-formed option list
// (RFC 791): single-byte End of Option List (0) and No Operation (1), and
// type-length-value options whose length is at least 2 and fits.
func IPv4OptionsValid(opts []byte) bool {
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0: // End of Option List: the rest is padding
			return true
		case 1: // No Operation
			i++
		default:
			if i+1 >= len(opts) {
				return false
			}
			n := int(opts[i+1])
			if n < 2 || i+n > len(opts) {
				return false
			}
			i += n
		}
	}
	return true
}

// IPv4Fields are the fields of an option-less IPv4 header, for building one.
type IPv4Fields struct {
	TOS      uint8
	TotalLen uint16 // header plus payload
	ID       uint16
	Flags    uint16 // IPv4FlagDF and/or IPv4FlagMF
	FragOff  uint16 // in bytes; a multiple of 8
	TTL      uint8
	Protocol uint8
	Src, Dst IPv4Addr
}

// Encode writes a 20-byte header with its checksum into b[:20]; b must be at
// least that long.
func (f *IPv4Fields) Encode(b []byte) {
	_ = b[IPv4MinHeaderLen-1]
	b[ipVerIHL] = 4<<4 | 5
	b[ipTOS] = f.TOS
	binary.BigEndian.PutUint16(b[ipTotalLen:], f.TotalLen)
	binary.BigEndian.PutUint16(b[ipID:], f.ID)
	binary.BigEndian.PutUint16(b[ipFlagsFrag:], f.Flags&^ipv4FragOffMask|(f.FragOff/8)&ipv4FragOffMask)
	b[ipTTL] = f.TTL
	b[ipProto] = f.Protocol
	b[ipChecksum], b[ipChecksum+1] = 0, 0
	copy(b[ipSrc:], f.Src[:])
	copy(b[ipDst:], f.Dst[:])
	binary.BigEndian.PutUint16(b[ipChecksum:], Checksum(b[:IPv4MinHeaderLen]))
}
