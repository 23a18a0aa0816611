package netstack

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum (RFC 1071): the ones' complement of the ones' complement
// sum of the data taken as big-endian 16-bit words.
//
// Partial sums are uint32 values holding a 16-bit ones' complement sum (always
// <= 0xffff once returned by these functions). They combine with
// ChecksumCombine in any order, because ones' complement addition is
// commutative and associative; only the last piece of a message may have odd
// length (a middle piece of odd length would shift every later word by a byte).
// FinishChecksum turns a sum into the value written into a header.
//
// Typical uses:
//
//	ip.SetChecksum(Checksum(ip[:hlen]))                        // IPv4 header
//	s := PseudoHeaderSum(src, dst, ProtoTCP, uint16(len(seg)))  // TCP / UDP
//	tcp.SetChecksum(FinishChecksum(ChecksumAdd(s, seg)))
//	ok := FinishChecksum(ChecksumAdd(s, seg)) == 0              // verify

// ChecksumAdd adds b to the partial sum and returns the new partial sum. b is
// taken to start at an even offset of the message.
//
// It reads 8 bytes at a time into a 64-bit accumulator with end-around carry
// (the carry chain of bits.Add64), 32 bytes per loop turn, and folds once at
// the end; the ones' complement sum of 64-bit words folds to the same 16-bit
// sum as that of the 16-bit words they hold (RFC 1071 section 2(C)). Words
// are loaded little-endian (no byte swap per load) and the folded sum is
// swapped once: the sum is byte-order independent (RFC 1071 section 2(B)).
func ChecksumAdd(sum uint32, b []byte) uint32 {
	var acc, c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b)), c)
		b = b[2:]
	}
	acc, c = bits.Add64(acc, 0, c)
	acc += c // cannot carry again: acc was 0 if c is 1
	be := uint64(bits.ReverseBytes16(uint16(fold64(acc)))) + uint64(sum)
	if len(b) == 1 {
		// An odd final byte is padded with a zero byte on its right.
		be += uint64(b[0]) << 8
	}
	return fold64(be)
}

// fold64 folds a 64-bit ones' complement sum to 16 bits.
func fold64(acc uint64) uint32 {
	acc = (acc >> 32) + (acc & 0xffffffff) // at most 33 bits
	acc = (acc >> 32) + (acc & 0xffffffff) // at most 32 bits
	acc = (acc >> 16) + (acc & 0xffff)     // at most 17 bits
	acc = (acc >> 16) + (acc & 0xffff)     // 16 bits
	return uint32(acc)
}

// ChecksumCombine adds two partial sums.
func ChecksumCombine(a, b uint32) uint32 {
	return fold64(uint64(a) + uint64(b))
}

// FinishChecksum returns the checksum field value for a partial sum: its ones'
// complement. A message that already includes its correct checksum finishes
// to 0.
func FinishChecksum(sum uint32) uint16 {
	return ^uint16(fold64(uint64(sum)))
}

// Checksum returns the Internet checksum of b, ready to store in a header whose
// checksum field is zero inside b.
func Checksum(b []byte) uint16 {
	return FinishChecksum(ChecksumAdd(0, b))
}

// PseudoHeaderSum returns the partial sum of the IPv4 pseudo-header used by TCP
// and UDP (RFC 9293 section 3.1, RFC 768):
//
//	+--------+--------+--------+--------+
//	|           Source Address          |
//	+--------+--------+--------+--------+
//	|         Destination Address       |
//	+--------+--------+--------+--------+
//	|  zero  |  PTCL  |    TCP Length   |
//	+--------+--------+--------+--------+
//
// length is the transport header plus payload in bytes.
func PseudoHeaderSum(src, dst IPv4Addr, proto uint8, length uint16) uint32 {
	s := uint64(binary.BigEndian.Uint32(src[:])) +
		uint64(binary.BigEndian.Uint32(dst[:])) +
		uint64(proto) + uint64(length)
	return fold64(s)
}

// ChecksumUpdate16 returns the new checksum field after a 16-bit word of the
// covered data changes from old to new, without summing the data again
// (RFC 1624 equation 3: HC' = ~(~HC + ~m + m')).
//
// Ones' complement has two zeros, and a sum cannot tell which one the data
// holds: words adding up to 0xffff, or all words zero. For the first a full
// computation gives 0x0000, and so does equation 3; for all-zero data it
// gives 0xffff, the only value a receiver accepts (it adds the field to the
// data and expects 0xffff, RFC 1071), where equation 3 still gives 0x0000.
// Data can become all zero only when new is zero, so then 0x0000 is
// returned as 0xffff: right for all-zero data and, for other data, accepted
// just as 0x0000 is. No protocol here gives a checksum of 0 a meaning of
// its own, as UDP does.
func ChecksumUpdate16(check, old, new uint16) uint16 {
	s := uint64(^check) + uint64(^old) + uint64(new)
	return updated(^uint16(fold64(s)), new == 0)
}

// ChecksumUpdate32 is ChecksumUpdate16 for a 32-bit field (an address or a
// sequence number) that sits at an even offset.
func ChecksumUpdate32(check uint16, old, new uint32) uint16 {
	s := uint64(^check) +
		uint64(^uint16(old>>16)) + uint64(^uint16(old)) +
		uint64(uint16(new>>16)) + uint64(uint16(new))
	return updated(^uint16(fold64(s)), new == 0)
}

// updated turns an updated checksum of 0x0000 into 0xffff when the changed
// field became zero, the one case where the data may now be all zero.
func updated(check uint16, newZero bool) uint16 {
	if check == 0 && newZero {
		return 0xffff
	}
	return check
}
