package netstack

import "encoding/binary"

// TCP is a view over a TCP segment (header, options and payload), RFC 9293 §3.1:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Acknowledgment Number                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Data |       |C|E|U|A|P|R|S|F|                               |
//	| Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//	|       |       |R|E|G|K|H|T|N|N|                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Checksum            |         Urgent Pointer        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           [Options]                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                             Data                              :
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Call Valid once; after it returns true no accessor can panic. The view
// aliases the frame it was cut from and is valid as long as that frame.
type TCP []byte

const (
	tcpSrcPort  = 0
	tcpDstPort  = 2
	tcpSeq      = 4
	tcpAck      = 8
	tcpDataOff  = 12
	tcpFlagsOff = 13
	tcpWindow   = 14
	tcpCsumOff  = 16
	tcpUrgent   = 18

	// TCPMinHeaderLen is the length of a header without options.
	TCPMinHeaderLen = 20
	// TCPMaxHeaderLen is the largest header the data offset can express.
	TCPMaxHeaderLen = 60
)

// TCP flags (byte 13 of the header).
const (
	TCPFlagFIN = 1 << 0
	TCPFlagSYN = 1 << 1
	TCPFlagRST = 1 << 2
	TCPFlagPSH = 1 << 3
	TCPFlagACK = 1 << 4
	TCPFlagURG = 1 << 5
	TCPFlagECE = 1 << 6
	TCPFlagCWR = 1 << 7
)

// TCP option kinds (RFC 9293 §3.2, RFC 7323, RFC 2018).
const (
	tcpOptEnd       = 0
	tcpOptNOP       = 1
	tcpOptMSS       = 2
	tcpOptWScale    = 3
	tcpOptSACKPerm  = 4
	tcpOptSACK      = 5
	tcpOptTimestamp = 8
)

// Valid reports whether t holds a complete header: at least 20 bytes and a
// data offset between 5 and the segment length.
func (t TCP) Valid() bool {
	if len(t) < TCPMinHeaderLen {
		return false
	}
	off := int(t[tcpDataOff]>>4) * 4
	return off >= TCPMinHeaderLen && off <= len(t)
}

func (t TCP) SrcPort() uint16  { return binary.BigEndian.Uint16(t[tcpSrcPort:]) }
func (t TCP) DstPort() uint16  { return binary.BigEndian.Uint16(t[tcpDstPort:]) }
func (t TCP) Seq() uint32      { return binary.BigEndian.Uint32(t[tcpSeq:]) }
func (t TCP) Ack() uint32      { return binary.BigEndian.Uint32(t[tcpAck:]) }
func (t TCP) HeaderLen() int   { return int(t[tcpDataOff]>>4) * 4 }
func (t TCP) Flags() uint8     { return t[tcpFlagsOff] }
func (t TCP) Window() uint16   { return binary.BigEndian.Uint16(t[tcpWindow:]) }
func (t TCP) Checksum() uint16 { return binary.BigEndian.Uint16(t[tcpCsumOff:]) }
func (t TCP) Urgent() uint16   { return binary.BigEndian.Uint16(t[tcpUrgent:]) }
func (t TCP) Options() []byte  { return t[TCPMinHeaderLen:t.HeaderLen()] }
func (t TCP) Payload() []byte  { return t[t.HeaderLen():] }

// SetChecksum stores the checksum field.
func (t TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(t[tcpCsumOff:], c) }

// TCPSACKBlock is one SACK block (RFC 2018 §3): bytes [Left, Right) received.
type TCPSACKBlock struct{ Left, Right uint32 }

// TCPFields is the parsed form of a TCP header with the options percore knows.
// Decode fills it from a view; Encode writes it into a buffer.
type TCPFields struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8
	Window           uint16
	Urgent           uint16

	MSS           uint16 // 0: option absent
	HasWScale     bool
	WScale        uint8 // shift count, only if HasWScale
	SACKPermitted bool
	HasTimestamp  bool
	TSVal, TSEcr  uint32
	NSACK         int // blocks used in SACK
	SACK          [4]TCPSACKBlock
}

// Decode fills f from a valid view t. Malformed options (a length byte that
// runs past the header or is too short) end option parsing and make Decode
// return false; the fixed fields are filled regardless.
func (f *TCPFields) Decode(t TCP) bool {
	*f = TCPFields{
		SrcPort: t.SrcPort(), DstPort: t.DstPort(),
		Seq: t.Seq(), Ack: t.Ack(), Flags: t.Flags(),
		Window: t.Window(), Urgent: t.Urgent(),
	}
	return f.decodeOptions(t.Options())
}

func (f *TCPFields) decodeOptions(o []byte) bool {
	for len(o) > 0 {
		kind := o[0]
		if kind == tcpOptEnd {
			return true
		}
		if kind == tcpOptNOP {
			o = o[1:]
			continue
		}
		if len(o) < 2 || int(o[1]) < 2 || int(o[1]) > len(o) {
			return false
		}
		n := int(o[1])
		body := o[2:n]
		switch kind {
		case tcpOptMSS:
			if n != 4 {
				return false
			}
			f.MSS = binary.BigEndian.Uint16(body)
		case tcpOptWScale:
			if n != 3 {
				return false
			}
			f.HasWScale, f.WScale = true, body[0]
		case tcpOptSACKPerm:
			if n != 2 {
				return false
			}
			f.SACKPermitted = true
		case tcpOptSACK:
			if (n-2)%8 != 0 || n == 2 {
				return false
			}
			for i := 0; i+8 <= len(body) && f.NSACK < len(f.SACK); i += 8 {
				f.SACK[f.NSACK] = TCPSACKBlock{
					Left:  binary.BigEndian.Uint32(body[i:]),
					Right: binary.BigEndian.Uint32(body[i+4:]),
				}
				f.NSACK++
			}
		case tcpOptTimestamp:
			if n != 10 {
				return false
			}
			f.HasTimestamp = true
			f.TSVal = binary.BigEndian.Uint32(body)
			f.TSEcr = binary.BigEndian.Uint32(body[4:])
		}
		o = o[n:]
	}
	return true
}

// HeaderLen returns the encoded header length of f, options padded to 4 bytes.
func (f *TCPFields) HeaderLen() int {
	n := 0
	if f.MSS != 0 {
		n += 4
	}
	if f.HasWScale {
		n += 4 // NOP + 3
	}
	if f.SACKPermitted && !f.HasTimestamp {
		n += 4 // NOP NOP + 2
	}
	if f.HasTimestamp {
		n += 12 // NOP NOP + 10, or SACK-permitted + 10
	}
	if f.NSACK > 0 {
		n += 4 + 8*f.NSACK // NOP NOP + 2 + blocks
	}
	return TCPMinHeaderLen + n
}

// Encode writes the header with options into b (at least f.HeaderLen() bytes)
// with a zero checksum and returns the header length. Options use the layouts
// Linux sends, so that captures compare easily. SACK blocks that would take
// the header past 60 bytes are dropped from f first.
func (f *TCPFields) Encode(b []byte) int {
	f.NSACK = min(max(f.NSACK, 0), len(f.SACK))
	for f.NSACK > 0 && f.HeaderLen() > TCPMaxHeaderLen {
		f.NSACK--
	}
	hl := f.HeaderLen()
	_ = b[hl-1]
	binary.BigEndian.PutUint16(b[tcpSrcPort:], f.SrcPort)
	binary.BigEndian.PutUint16(b[tcpDstPort:], f.DstPort)
	binary.BigEndian.PutUint32(b[tcpSeq:], f.Seq)
	binary.BigEndian.PutUint32(b[tcpAck:], f.Ack)
	b[tcpDataOff] = uint8(hl/4) << 4
	b[tcpFlagsOff] = f.Flags
	binary.BigEndian.PutUint16(b[tcpWindow:], f.Window)
	binary.BigEndian.PutUint16(b[tcpCsumOff:], 0)
	binary.BigEndian.PutUint16(b[tcpUrgent:], f.Urgent)
	o := b[TCPMinHeaderLen:hl]
	if f.MSS != 0 {
		o[0], o[1] = tcpOptMSS, 4
		binary.BigEndian.PutUint16(o[2:], f.MSS)
		o = o[4:]
	}
	if f.SACKPermitted && f.HasTimestamp {
		o[0], o[1] = tcpOptSACKPerm, 2
		o = o[2:]
	} else if f.SACKPermitted {
		o[0], o[1], o[2], o[3] = tcpOptNOP, tcpOptNOP, tcpOptSACKPerm, 2
		o = o[4:]
	}
	if f.HasTimestamp {
		if !f.SACKPermitted {
			o[0], o[1] = tcpOptNOP, tcpOptNOP
			o = o[2:]
		}
		o[0], o[1] = tcpOptTimestamp, 10
		binary.BigEndian.PutUint32(o[2:], f.TSVal)
		binary.BigEndian.PutUint32(o[6:], f.TSEcr)
		o = o[10:]
	}
	if f.HasWScale {
		o[0], o[1], o[2], o[3] = tcpOptNOP, tcpOptWScale, 3, f.WScale
		o = o[4:]
	}
	if f.NSACK > 0 {
		o[0], o[1], o[2], o[3] = tcpOptNOP, tcpOptNOP, tcpOptSACK, uint8(2+8*f.NSACK)
		o = o[4:]
		for i := 0; i < f.NSACK; i++ {
			binary.BigEndian.PutUint32(o, f.SACK[i].Left)
			binary.BigEndian.PutUint32(o[4:], f.SACK[i].Right)
			o = o[8:]
		}
	}
	return hl
}

// tcpChecksum returns the TCP checksum of seg (checksum field included as it
// is) with the IPv4 pseudo-header of src, dst (RFC 9293 §3.1). A segment with
// a correct checksum gives 0.
func tcpChecksum(src, dst uint32, seg []byte) uint16 {
	ph := PseudoHeaderSum(IPv4AddrFromUint32(src), IPv4AddrFromUint32(dst), ProtoTCP, uint16(len(seg)))
	return FinishChecksum(ChecksumAdd(ph, seg))
}
