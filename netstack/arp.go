package netstack

import "math/bits"

// ARP (RFC 826) for one stack: answering requests for our address, a
// fixed-size neighbour cache, resolution with retries, and the bounded queue
// of frames that wait for it.

// ARP cache entry states.
const (
	arpFree       = iota
	arpIncomplete // request sent, no answer yet; expires is the next retry
	arpReachable  // mac is known; expires is when it stops being used
)

// arpEntry is one neighbour. 24 bytes.
type arpEntry struct {
	ip        IPv4Addr
	mac       MAC
	state     uint8
	tries     uint8 // requests sent for this resolution
	refreshed bool  // reachable: a unicast refresh request was sent
	expires   int64 // ns since the stack's epoch
}

// arpProbe is how many consecutive slots an address may occupy: lookups scan
// the whole window (no tombstones needed), inserts take a free slot in it or
// evict the entry that expires first.
const arpProbe = 8

// arpCache is an open-addressing table of arpEntry, allocated once.
type arpCache struct {
	e     []arpEntry
	shift uint // 32 - log2(len(e))
}

// init sizes the table to a power of two of at least n (and arpProbe) slots
// and returns that size.
func (c *arpCache) init(n int) int {
	size := arpProbe
	for size < n {
		size <<= 1
	}
	c.e = make([]arpEntry, size+arpProbe-1) // the tail lets a window run past the end
	c.shift = 32
	for s := size; s > 1; s >>= 1 {
		c.shift--
	}
	return size
}

// home returns the first slot of ip's window (Fibonacci hashing).
func (c *arpCache) home(ip IPv4Addr) int {
	return int((ip.Uint32() * 0x9e3779b1) >> c.shift)
}

// find returns ip's entry, or nil.
func (c *arpCache) find(ip IPv4Addr) *arpEntry {
	w := c.e[c.home(ip):][:arpProbe]
	for i := range w {
		if w[i].state != arpFree && w[i].ip == ip {
			return &w[i]
		}
	}
	return nil
}

// slot returns ip's entry if present, else a free slot in ip's window, else
// the entry to evict and true. The victim is an incomplete entry if any (the
// cheapest loss: a resolution that a flood of new sources started), else the
// reachable entry that expires first; the entry for keep (the gateway) is
// never chosen. It returns nil, false only when the whole window is keep,
// which cannot happen (keep is one address).
func (c *arpCache) slot(ip, keep IPv4Addr) (e *arpEntry, evict bool) {
	w := c.e[c.home(ip):][:arpProbe]
	var free, victim *arpEntry
	for i := range w {
		switch {
		case w[i].state == arpFree:
			if free == nil {
				free = &w[i]
			}
		case w[i].ip == ip:
			return &w[i], false
		case w[i].ip == keep:
		case victim == nil,
			victim.state == arpReachable && w[i].state == arpIncomplete,
			victim.state == w[i].state && w[i].expires < victim.expires:
			victim = &w[i]
		}
	}
	if free != nil {
		return free, false
	}
	return victim, true
}

// pendingFrame is a tx frame waiting for its next hop's MAC. Its Ethernet
// destination is filled in when the hop resolves.
type pendingFrame struct {
	f   Frame
	n   int // frame length
	hop IPv4Addr
}

// arpInput handles one ARP packet. ARP carries no checksum, and a bit
// flipped on the wire (or a forger) must not be able to redirect a
// neighbour's traffic, so everything that can be checked is, and the cache
// learns only what Linux's arp_process learns from: a request for one of our
// addresses (the sender is about to talk to us), or a reply to a request of
// ours. Unsolicited and gratuitous ARP never changes the cache (as Linux
// with arp_accept=0, and stricter: Linux also refreshes existing entries
// from them).
func (s *Stack) arpInput(e Ethernet) {
	a := ARP(e.Payload())
	if len(a) < ARPLen {
		s.stats.ARPTruncated++
		return
	}
	if !a.Valid() {
		s.stats.ARPUnsupported++
		return
	}
	op := a.Op()
	if op != ARPRequest && op != ARPReply {
		s.stats.ARPBadOp++
		return
	}
	sha, spa, tpa := a.SenderMAC(), a.SenderIP(), a.TargetIP()
	if sha.IsMulticast() || sha == MACZero || (spa != IPv4Zero && !s.unicastOnLink(spa)) {
		s.stats.ARPBadSender++
		return
	}
	if e.Src() != sha {
		// No proxy or bridge between us and an on-link neighbour rewrites
		// the sender: one of the two copies was damaged.
		s.stats.ARPBadEthSrc++
		return
	}
	if s.ours(spa) {
		// Someone else uses our address (or our own frame came back): never
		// cache it, never answer it.
		s.stats.ARPConflict++
		return
	}
	if !s.ours(tpa) {
		s.stats.ARPNotForUs++
		return
	}
	if op == ARPReply {
		// A reply to us answers a request of ours: the entry is incomplete,
		// or reachable with its unicast refresh out. spa 0.0.0.0 is never
		// an answer.
		c := s.arp.find(spa)
		if spa == IPv4Zero || a.TargetMAC() != s.cfg.MAC || c == nil || (c.state != arpIncomplete && !c.refreshed) {
			s.stats.ARPUnsolicited++
			return
		}
		s.stats.ARPRepliesRx++
		s.arpLearn(spa, sha, false)
		return
	}
	s.stats.ARPRequestsRx++
	if spa != IPv4Zero { // 0.0.0.0 is an RFC 5227 probe: nothing to learn
		s.arpLearn(spa, sha, true)
	}
	s.sendARPFrom(tpa, ARPReply, sha, sha, spa)
}

// unicastOnLink reports whether a can be a neighbour's own address: in our
// subnet, and neither its network nor its broadcast address (a /31 or /32
// has neither) nor a martian.
func (s *Stack) unicastOnLink(a IPv4Addr) bool {
	if !s.onLink(a) || s.martian(a) || a == s.subnetBcast {
		return false
	}
	return a.Uint32() != s.net || bits.OnesCount32(s.mask) >= 31
}

// sendARP sends an ARP packet from us (Addr) to ethDst, with target tha/tpa.
func (s *Stack) sendARP(op uint16, ethDst, tha MAC, tpa IPv4Addr) {
	s.sendARPFrom(s.cfg.Addr, op, ethDst, tha, tpa)
}

// sendARPFrom is sendARP with sender address spa (a reply for an alias
// comes from the alias).
func (s *Stack) sendARPFrom(spa IPv4Addr, op uint16, ethDst, tha MAC, tpa IPv4Addr) {
	f, ok := s.allocTx()
	if !ok {
		return
	}
	if len(f.Buf) < EthernetHeaderLen+ARPLen { // a link with tiny frames
		s.freeTx(f)
		s.stats.TxNoFrame++
		return
	}
	(&EthernetFields{Dst: ethDst, Src: s.cfg.MAC, Type: EtherTypeARP}).Encode(f.Buf)
	(&ARPFields{Op: op, SenderMAC: s.cfg.MAC, SenderIP: spa, TargetMAC: tha, TargetIP: tpa}).Encode(f.Buf[EthernetHeaderLen:])
	s.queueTx(f, EthernetHeaderLen+ARPLen)
	if op == ARPReply {
		s.stats.ARPRepliesTx++
	} else {
		s.stats.ARPRequestsTx++
	}
}

// arpLearn records ip at mac. With create false only an existing entry is
// updated. Frames waiting for ip are sent when it becomes reachable.
func (s *Stack) arpLearn(ip IPv4Addr, mac MAC, create bool) {
	var e *arpEntry
	if create {
		var evict bool
		if e, evict = s.arp.slot(ip, s.cfg.Gateway); e == nil {
			return
		}
		if evict {
			s.arpEvict(e)
		}
	} else if e = s.arp.find(ip); e == nil {
		return
	}
	was := e.state
	e.ip, e.mac, e.state, e.tries, e.refreshed = ip, mac, arpReachable, 0, false
	e.expires = s.now + int64(s.cfg.ARPLifetime)
	if was == arpIncomplete {
		s.releasePending(ip, mac)
	}
}

// arpGlean refreshes or adds the sender of a received IPv4 packet (already
// known to be on-link and unicast). It never evicts: gleaning from a flood
// of (spoofed) on-link sources only fills free slots. (Answering such a
// flood does resolve, and so evict; slot then prefers the flood's own
// incomplete entries, and never takes the gateway's.) No checksum covers the
// Ethernet source, so a packet never moves a known neighbour to another MAC,
// nor completes a resolution: ARP does both.
func (s *Stack) arpGlean(ip IPv4Addr, mac MAC) {
	e, evict := s.arp.slot(ip, s.cfg.Gateway)
	switch {
	case evict, e.state == arpIncomplete:
	case e.state == arpFree:
		s.arpLearn(ip, mac, true)
	case e.mac == mac: // the per-packet case
		e.expires = s.now + int64(s.cfg.ARPLifetime)
	default:
		s.stats.ARPGleanConflict++
	}
}

// arpEvict empties an entry to reuse its slot.
func (s *Stack) arpEvict(e *arpEntry) {
	s.stats.ARPEvictions++
	if e.state == arpIncomplete {
		s.dropPending(e.ip)
	}
	*e = arpEntry{}
}

// resolve returns hop's MAC, or starts (or continues) resolving it and
// returns false.
func (s *Stack) resolve(hop IPv4Addr) (MAC, bool) {
	e := s.arp.find(hop)
	if e != nil && e.state == arpReachable {
		if e.expires > s.now {
			// In the last quarter of its life an entry in use is checked
			// with one unicast request (RFC 1122 2.3.2.1), so a busy peer
			// that gleaning cannot refresh (the gateway) never stalls.
			if !e.refreshed && e.expires-s.now < int64(s.cfg.ARPLifetime)/4 {
				e.refreshed = true
				s.sendARP(ARPRequest, e.mac, MACZero, hop)
			}
			return e.mac, true
		}
		// Expired: resolve again (an active peer is refreshed by gleaning,
		// so this is rare: an idle peer or the gateway).
		*e = arpEntry{}
		e = nil
	}
	if e != nil { // incomplete: a request is out; the retry timer runs
		return MAC{}, false
	}
	e, evict := s.arp.slot(hop, s.cfg.Gateway)
	if e == nil {
		return MAC{}, false
	}
	if evict {
		s.arpEvict(e)
	}
	*e = arpEntry{ip: hop, state: arpIncomplete, tries: 1, expires: s.now + int64(s.cfg.ARPRetryInterval)}
	s.arpIncomplete = true
	s.sendARP(ARPRequest, MACBroadcast, MACZero, hop)
	return MAC{}, false
}

// arpTimers retries or fails incomplete entries that are due and returns the
// earliest retry deadline (noDeadline if none). It scans the table only when
// an incomplete entry exists.
func (s *Stack) arpTimers() int64 {
	if len(s.pending) == 0 && !s.arpIncomplete {
		return noDeadline
	}
	next := noDeadline
	any := false
	for i := range s.arp.e {
		e := &s.arp.e[i]
		if e.state != arpIncomplete {
			continue
		}
		if e.expires <= s.now {
			if int(e.tries) >= s.cfg.ARPMaxRequests {
				s.stats.ARPResolveFailed++
				s.dropPending(e.ip)
				*e = arpEntry{}
				continue
			}
			e.expires = s.now + int64(s.cfg.ARPRetryInterval)<<e.tries
			e.tries++
			s.sendARP(ARPRequest, MACBroadcast, MACZero, e.ip)
		}
		any = true
		next = min(next, e.expires)
	}
	s.arpIncomplete = any
	return next
}

// enqueuePending parks a filled frame until hop resolves; when the queue is
// full the frame is dropped.
func (s *Stack) enqueuePending(f Frame, n int, hop IPv4Addr) {
	if len(s.pending) == cap(s.pending) {
		s.stats.PendingDropFull++
		s.freeTx(f)
		return
	}
	s.pending = append(s.pending, pendingFrame{f: f, n: n, hop: hop})
	s.arpIncomplete = true
}

// releasePending sends, in order, the frames waiting for ip.
func (s *Stack) releasePending(ip IPv4Addr, mac MAC) {
	j := 0
	for _, p := range s.pending {
		if p.hop == ip {
			Ethernet(p.f.Buf).SetDst(mac)
			s.queueTx(p.f, p.n)
			continue
		}
		s.pending[j] = p
		j++
	}
	clear(s.pending[j:])
	s.pending = s.pending[:j]
}

// dropPending frees the frames waiting for ip.
func (s *Stack) dropPending(ip IPv4Addr) {
	j := 0
	for _, p := range s.pending {
		if p.hop == ip {
			s.stats.PendingDropFail++
			s.freeTx(p.f)
			continue
		}
		s.pending[j] = p
		j++
	}
	clear(s.pending[j:])
	s.pending = s.pending[:j]
}
