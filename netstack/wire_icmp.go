package netstack

import "encoding/binary"

// ICMPv4 message (RFC 792); for echo and echo reply the second word holds an
// identifier and a sequence number:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Identifier          |        Sequence Number        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Data ...
//	+-+-+-+-+-
//
// The checksum covers the whole message, data included.
const (
	icmpType     = 0
	icmpCode     = 1
	icmpChecksum = 2
	icmpIdent    = 4
	icmpSeq      = 6

	// ICMPv4HeaderLen is the length of the type, code, checksum and the
	// 4-byte rest-of-header word.
	ICMPv4HeaderLen = 8
)

// ICMPv4 types and codes the stack handles.
const (
	ICMPv4EchoReply   = 0
	ICMPv4Unreachable = 3
	ICMPv4EchoRequest = 8

	// ICMPv4FragNeeded is the Destination Unreachable code "fragmentation
	// needed and DF set" (RFC 792); RFC 1191 puts the next-hop MTU in the
	// low 16 bits of the second word.
	ICMPv4FragNeeded = 4
)

// ICMPv4 is a view over an ICMPv4 message (the IPv4 payload, so it ends at
// Total Length). After Valid returns true no accessor can panic.
type ICMPv4 []byte

// Valid reports whether m holds at least the 8-byte header.
func (m ICMPv4) Valid() bool { return len(m) >= ICMPv4HeaderLen }

// Type returns the message type.
func (m ICMPv4) Type() uint8 { return m[icmpType] }

// Code returns the message code.
func (m ICMPv4) Code() uint8 { return m[icmpCode] }

// Checksum returns the checksum field.
func (m ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(m[icmpChecksum:]) }

// ChecksumOK reports whether the whole message sums to zero.
func (m ICMPv4) ChecksumOK() bool { return Checksum(m) == 0 }

// Ident returns the echo identifier.
func (m ICMPv4) Ident() uint16 { return binary.BigEndian.Uint16(m[icmpIdent:]) }

// Seq returns the echo sequence number.
func (m ICMPv4) Seq() uint16 { return binary.BigEndian.Uint16(m[icmpSeq:]) }

// NextHopMTU returns the next-hop MTU of a "fragmentation needed" message
// (RFC 1191 §4); 0 from a router that predates it.
func (m ICMPv4) NextHopMTU() uint16 { return binary.BigEndian.Uint16(m[icmpSeq:]) }

// Payload returns the data after the 8-byte header.
func (m ICMPv4) Payload() []byte { return m[ICMPv4HeaderLen:] }

// ICMPv4Fields are the header fields of an echo or echo reply message.
type ICMPv4Fields struct {
	Type, Code uint8
	Ident, Seq uint16
}

// Encode writes the 8-byte header into b and the checksum over all of b, so
// the data must already be in b[ICMPv4HeaderLen:]; b must be at least
// ICMPv4HeaderLen long.
func (f *ICMPv4Fields) Encode(b []byte) {
	_ = b[ICMPv4HeaderLen-1]
	b[icmpType] = f.Type
	b[icmpCode] = f.Code
	b[icmpChecksum], b[icmpChecksum+1] = 0, 0
	binary.BigEndian.PutUint16(b[icmpIdent:], f.Ident)
	binary.BigEndian.PutUint16(b[icmpSeq:], f.Seq)
	binary.BigEndian.PutUint16(b[icmpChecksum:], Checksum(b))
}
