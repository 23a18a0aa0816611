package netstack

import "math/bits"

// tcpKey is a connection's 4-tuple from our side: remote and local address and
// port. It is comparable and hashes without allocation.
type tcpKey struct {
	raddr, laddr uint32
	rport, lport uint16
}

// sipHash24 is SipHash-2-4 of the 16 bytes (a, b) under key (k0, k1). It keys
// the ISN (RFC 6528) and SYN cookies, so that a peer cannot predict
// sequence numbers or forge a cookie.
func sipHash24(k0, k1, a, b uint64) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	for _, m := range [3]uint64{a, b, 16 << 56} {
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

func (k tcpKey) words() (uint64, uint64) {
	return uint64(k.raddr)<<32 | uint64(k.laddr), uint64(k.rport)<<16 | uint64(k.lport)
}

// tcpSecrets are the per-layer keys, derived from the configured seed so that
// tests are deterministic; production passes a random seed.
type tcpSecrets struct {
	isn, cookie, table, ts [2]uint64
}

func newTCPSecrets(seed uint64) tcpSecrets {
	var s tcpSecrets
	x := seed
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	s.isn = [2]uint64{next(), next()}
	s.cookie = [2]uint64{next(), next()}
	s.table = [2]uint64{next(), next()}
	s.ts = [2]uint64{next(), next()}
	return s
}

// isn returns the initial sequence number for k at time now (ns), RFC 6528 §3:
// ISN = M + F(localip, localport, remoteip, remoteport, secretkey), where M is
// a 4-microsecond timer and F a keyed hash (SipHash here).
func (s *tcpSecrets) isnFor(k tcpKey, now int64) seqnum {
	a, b := k.words()
	return seqnum(uint32(now/4000) + uint32(sipHash24(s.isn[0], s.isn[1], a, b)))
}

// tsOffFor returns the offset of our TSval clock towards k's peer: keyed by
// the two addresses only, as Linux's secure_tcp_ts_off, so that the
// connections of one host pair share a clock. A client reusing a port then
// sends a TSval above the one its last connection left in the peer's
// TIME-WAIT, which lets the peer reopen it (RFC 6191); an offset per
// connection made that a coin toss. It still hides our clock from others.
func (s *tcpSecrets) tsOffFor(k tcpKey) uint32 {
	return uint32(sipHash24(s.ts[0], s.ts[1], uint64(k.raddr)<<32|uint64(k.laddr), 0))
}

// SYN cookies. The cookie is our ISN when the SYN backlog is full, so that a
// SYN costs no state; the ACK that completes the handshake carries it back
// (ack-1). Layout, high bit first:
//
//	| t: 5 bits (64 s ticks, mod 32) | mss index: 3 bits | hash: 24 bits |
//
// hash = SipHash(cookie key, 4-tuple, peer ISN, t). A cookie is valid for the
// tick it was made in and the one before (64-128 s), like Linux.
const tcpCookieTick = 64e9 // ns

// tcpCookieLife is the longest a cookie stays valid: to the end of the tick
// after the one it was made in.
const tcpCookieLife = 2 * tcpCookieTick

// tcpCookieMSS are the MSS values a cookie can encode (Linux's table, RFC 4987 §3.6).
var tcpCookieMSS = [8]uint16{536, 1300, 1440, 1460, 4312, 8960, 1220, 1380}

func (s *tcpSecrets) cookieHash(k tcpKey, peerISN seqnum, t uint32) uint32 {
	a, b := k.words()
	return uint32(sipHash24(s.cookie[0], s.cookie[1], a, b^uint64(peerISN)<<32^uint64(t)<<27)) & 0xFFFFFF
}

// makeCookie encodes the largest table MSS not above mss.
func (s *tcpSecrets) makeCookie(k tcpKey, peerISN seqnum, mss uint16, now int64) (seqnum, uint16) {
	idx := 0
	for i, m := range tcpCookieMSS {
		if m <= mss && m > tcpCookieMSS[idx] {
			idx = i
		}
	}
	t := uint32(now/tcpCookieTick) & 31
	return seqnum(t<<27 | uint32(idx)<<24 | s.cookieHash(k, peerISN, t)), tcpCookieMSS[idx]
}

// checkCookie validates cookie (the ACK's ack-1) for the ACK's peer ISN
// (seq-1) and returns the encoded MSS, or 0 when the cookie is forged or stale.
func (s *tcpSecrets) checkCookie(k tcpKey, peerISN, cookie seqnum, now int64) uint16 {
	t := uint32(cookie) >> 27
	cur := uint32(now/tcpCookieTick) & 31
	if (cur-t)&31 > 1 {
		return 0
	}
	if uint32(cookie)&0xFFFFFF != s.cookieHash(k, peerISN, t) {
		return 0
	}
	return tcpCookieMSS[(uint32(cookie)>>24)&7]
}
