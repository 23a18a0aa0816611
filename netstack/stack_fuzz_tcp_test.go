package netstack

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// fuzzEcho is a TCPApp that echoes what it is fed, from a fixed buffer.
type fuzzEcho struct {
	buf    [2048]byte
	n      int
	out    [1][]byte
	closed bool
}

func (a *fuzzEcho) Feed(p []byte, now time.Time) int {
	n := copy(a.buf[a.n:], p)
	a.n += n
	return n
}

func (a *fuzzEcho) Output() [][]byte {
	if a.n == 0 {
		return nil
	}
	a.out[0] = a.buf[:a.n]
	return a.out[:]
}

func (a *fuzzEcho) Advance(n int) {
	copy(a.buf[:], a.buf[n:a.n])
	a.n -= n
}

func (a *fuzzEcho) Closing() bool            { return a.closed }
func (a *fuzzEcho) PeerClosed(now time.Time) { a.closed = true }

// fuzzEndpoint lends fuzzEcho apps from a fixed pool.
type fuzzEndpoint struct {
	free []*fuzzEcho
}

func newFuzzEndpoint(n int) *fuzzEndpoint {
	ep := &fuzzEndpoint{}
	for range n {
		ep.free = append(ep.free, &fuzzEcho{})
	}
	return ep
}

func (ep *fuzzEndpoint) Accept(remote netip.AddrPort, _ TCPHandle, now time.Time) TCPApp {
	if len(ep.free) == 0 {
		return nil
	}
	a := ep.free[len(ep.free)-1]
	ep.free = ep.free[:len(ep.free)-1]
	*a = fuzzEcho{}
	return a
}

func (ep *fuzzEndpoint) Release(app TCPApp, now time.Time) {
	ep.free = append(ep.free, app.(*fuzzEcho))
}

// tcpPeerFix makes a fuzzed TCP segment fit the conversation: seq and ack
// follow the last segment the stack sent to the same port pair (so the
// fuzzer can complete handshakes and send in-window data), then the TCP
// checksum is recomputed.
type tcpPeerFix struct {
	// (our port, peer port) -> (our next seq, our ack), in a small fixed
	// table so the harness itself never allocates; the oldest is replaced.
	keys [16][2]uint16
	vals [16][2]uint32
	n    int
}

func (p *tcpPeerFix) get(k [2]uint16) ([2]uint32, bool) {
	for i := range min(p.n, len(p.keys)) {
		if p.keys[i] == k {
			return p.vals[i], true
		}
	}
	return [2]uint32{}, false
}

func (p *tcpPeerFix) put(k [2]uint16, v [2]uint32) {
	for i := range min(p.n, len(p.keys)) {
		if p.keys[i] == k {
			p.vals[i] = v
			return
		}
	}
	i := p.n % len(p.keys)
	p.keys[i], p.vals[i] = k, v
	p.n++
}

// learn records a TCP segment the stack sent.
func (p *tcpPeerFix) learn(frame []byte) {
	e := Ethernet(frame)
	if !e.Valid() || e.Type() != EtherTypeIPv4 {
		return
	}
	ip := IPv4(e.Payload())
	if !ip.Valid() || ip.Protocol() != ProtoTCP {
		return
	}
	t := TCP(ip.Payload())
	if !t.Valid() {
		return
	}
	next := t.Seq() + uint32(len(t.Payload()))
	if t.Flags()&(TCPFlagSYN|TCPFlagFIN) != 0 {
		next++
	}
	p.put([2]uint16{t.SrcPort(), t.DstPort()}, [2]uint32{next, t.Ack()})
}

// fix rewrites seq/ack (when asked and known) and the TCP checksum.
func (p *tcpPeerFix) fix(frame []byte, seqAck bool) {
	e := Ethernet(frame)
	if !e.Valid() || e.Type() != EtherTypeIPv4 {
		return
	}
	ip := IPv4(e.Payload())
	if ip.Check() != IPv4OK || ip.Protocol() != ProtoTCP {
		return
	}
	ip = ip[:ip.TotalLen()]
	seg := ip.Payload()
	if len(seg) < TCPMinHeaderLen {
		return
	}
	t := TCP(seg)
	if st, ok := p.get([2]uint16{t.DstPort(), t.SrcPort()}); ok && seqAck {
		binary.BigEndian.PutUint32(seg[4:], st[1])
		binary.BigEndian.PutUint32(seg[8:], st[0])
	}
	seg[16], seg[17] = 0, 0
	binary.BigEndian.PutUint16(seg[16:], FinishChecksum(ChecksumAdd(PseudoHeaderSum(ip.Src(), ip.Dst(), ProtoTCP, uint16(len(seg))), seg)))
}

// fixQuote makes an ICMP error's quoted TCP segment one the stack sent:
// its sequence number the last byte sent to that port pair, and its
// source our address (the ICMP checksum is fixed afterwards).
func (p *tcpPeerFix) fixQuote(frame []byte) {
	e := Ethernet(frame)
	if !e.Valid() || e.Type() != EtherTypeIPv4 {
		return
	}
	ip := IPv4(e.Payload())
	if ip.Check() != IPv4OK || ip.Protocol() != ProtoICMP {
		return
	}
	q := ICMPv4(ip[:ip.TotalLen()].Payload())
	if !q.Valid() || len(q.Payload()) < IPv4MinHeaderLen+8 {
		return
	}
	inner := IPv4(q.Payload())
	if inner.HeaderLen() < IPv4MinHeaderLen || len(inner) < inner.HeaderLen()+8 {
		return
	}
	us := ip.Dst()
	copy(inner[ipSrc:], us[:])
	t := TCP(inner[inner.HeaderLen():])
	if st, ok := p.get([2]uint16{t.SrcPort(), t.DstPort()}); ok {
		binary.BigEndian.PutUint32(t[tcpSeq:], st[0]-1)
	}
}

func tcpSeedFrame(t testing.TB, flags uint8, seq, ack uint32, data string) []byte {
	ipl := ipv4Layer(ipB, ipA, layers.IPProtocolTCP, ipOpts{flags: layers.IPv4DontFragment})
	tl := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: seq, Ack: ack, Window: 65535,
		SYN: flags&TCPFlagSYN != 0, ACK: flags&TCPFlagACK != 0, FIN: flags&TCPFlagFIN != 0, PSH: flags&TCPFlagPSH != 0, RST: flags&TCPFlagRST != 0}
	if flags&TCPFlagSYN != 0 {
		tl.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}}}
	}
	if err := tl.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ethLayer(macB, macA, layers.EthernetTypeIPv4), ipl, tl, gopacket.Payload(data))
}

// FuzzStackTCP is FuzzStackInput with TCP on: a listener on port 80 whose
// connections echo, and record flags that let the fuzzer play a peer
// (bit 3: take seq/ack from the stack's last segment; bit 4: fix the TCP
// checksum; bit 5: the link is short of frames; bit 6: an ICMP error quotes
// the stack's last segment to its port pair; bit 7: the frame carries a
// receive time, the record's step read as a signed count of 7 ms from the
// last Poll, so before that Poll too, which the stack must clamp). The same
// invariants hold, every TCP segment sent carries a valid checksum, and
// replaying the input reaches zero allocations.
func FuzzStackTCP(f *testing.F) {
	syn := tcpSeedFrame(f, TCPFlagSYN, 1000, 0, "")
	ack := tcpSeedFrame(f, TCPFlagACK, 0, 0, "")
	data := tcpSeedFrame(f, TCPFlagACK|TCPFlagPSH, 0, 0, "GET / HTTP/1.1\r\n\r\n")
	fin := tcpSeedFrame(f, TCPFlagACK|TCPFlagFIN, 0, 0, "")
	rst := tcpSeedFrame(f, TCPFlagRST, 0, 0, "")
	cat := func(rs ...[]byte) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, r...)
		}
		return b
	}
	const peer = 8 | 16 | 4
	f.Add(cat(fuzzRecord(syn, 4, 0), fuzzRecord(ack, peer, 0), fuzzRecord(data, peer, 1), fuzzRecord(fin, peer, 1), fuzzRecord(ack, peer, 10)))
	f.Add(cat(fuzzRecord(syn, 4, 0), fuzzRecord(data, peer, 0), fuzzRecord(nil, 4, 30), fuzzRecord(rst, peer, 0)))
	f.Add(cat(fuzzRecord(syn, 4, 0), fuzzRecord(syn, 4, 20), fuzzRecord(nil, 4, 100)))
	f.Add(cat(fuzzRecord(data, 16|4, 0), fuzzRecord(rst, 16|4, 0)))
	// Path MTU: a "fragmentation needed" quoting the echo in flight; and
	// data while the link is short of frames.
	oursIP := ipv4Layer(ipA, ipB, layers.IPProtocolTCP, ipOpts{flags: layers.IPv4DontFragment})
	oursTCP := &layers.TCP{SrcPort: 80, DstPort: 40000, Seq: 1, ACK: true, Window: 65535}
	if err := oursTCP.SetNetworkLayerForChecksum(oursIP); err != nil {
		f.Fatal(err)
	}
	ours := serialize(f, oursIP, oursTCP, gopacket.Payload("GET / HTTP/1.1\r\n\r\n"))
	tooBig := fragNeededFrame(macA, IPv4(ours), 576)
	f.Add(cat(fuzzRecord(syn, 4, 0), fuzzRecord(ack, peer, 0), fuzzRecord(data, peer, 0), fuzzRecord(tooBig, 64|4|2, 1), fuzzRecord(ack, peer, 10)))
	f.Add(cat(fuzzRecord(syn, 4, 0), fuzzRecord(ack, peer, 0), fuzzRecord(data, peer|32, 0), fuzzRecord(data, peer|32, 1)))
	// Receive times: the echo's ACK arrives 7 ms after the last Poll, read
	// 50 ms after it; then one stamped 7 ms before that Poll.
	f.Add(cat(fuzzRecord(syn, 4, 0), fuzzRecord(ack, peer, 0), fuzzRecord(data, peer, 1), fuzzRecord(ack, peer|128, 1), fuzzRecord(ack, peer|128, 0xff), fuzzRecord(fin, peer, 1)))
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := testConfig()
		cfg.ARPCacheSize, cfg.PendingMax, cfg.Batch, cfg.MaxRxBatches = 8, 4, 8, 2
		s, err := NewStack(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// A budget of three buffers of the four: pressure, and refusals.
		s.EnableTCP(TCPConfig{MaxConns: 8, SynBacklog: 2, RcvBufs: 4, RcvBuf: 4096, Seed: 1, Budget: NewMemBudget(3 * rcvBufBytes(4096))})
		if err := s.ListenTCP(80, newFuzzEndpoint(8)); err != nil {
			t.Fatal(err)
		}
		link := NewChanLink(1500, 64)
		pf := &tcpPeerFix{}
		now := time.Unix(1_000_000, 0)
		var frame [1514]byte
		checked := true
		take := func() {
			for link.Sent() > 0 {
				b, _ := link.Take()
				pf.learn(b)
				if checked {
					checkTx(t, s, b)
					if ip := IPv4(Ethernet(b).Payload()); ip.Protocol() == ProtoTCP &&
						FinishChecksum(ChecksumAdd(PseudoHeaderSum(ip.Src(), ip.Dst(), ProtoTCP, uint16(len(ip.Payload()))), ip.Payload())) != 0 {
						t.Fatalf("TCP segment with a bad checksum: % x", b)
					}
				}
			}
		}
		run := func() {
			d := in
			for i := 0; i < fuzzMaxFrames && len(d) >= 4; i++ {
				n := int(binary.BigEndian.Uint16(d))
				flags, step := d[2], d[3]
				d = d[4:]
				n = min(n, len(d), len(frame))
				fr := frame[:copy(frame[:], d[:n])]
				d = d[n:]
				if flags&16 != 0 {
					pf.fix(fr, flags&8 != 0)
				}
				if flags&64 != 0 {
					pf.fixQuote(fr)
				}
				s.FramesShort(flags&32 != 0)
				fixChecksums(fr, flags&1 != 0 || flags&16 != 0, flags&2 != 0)
				if flags&128 != 0 {
					link.InjectAt(fr, now.Add(time.Duration(int8(step))*7*time.Millisecond))
				} else {
					link.Inject(fr)
				}
				if flags&4 != 0 || i == fuzzMaxFrames-1 || len(d) < 4 {
					now = now.Add(time.Duration(step) * 50 * time.Millisecond)
					s.Poll(now, link)
					take()
				}
			}
			for range 3 {
				now = now.Add(2 * time.Minute)
				s.Poll(now, link)
				take()
			}
		}
		run()
		rx, tx := link.Lent()
		if st := s.Stats(); rx != 0 || tx != s.HeldTx() || st.RxOutcomes() != st.RxFrames {
			t.Fatalf("lent rx %d tx %d held %d; outcomes %d frames %d", rx, tx, s.HeldTx(), st.RxOutcomes(), st.RxFrames)
		}
		checkTCPInvariants(t, s.tcp)
		// Replays of the input must reach a state with no allocation: TCP
		// grows its connection pool on first use up to MaxConns (8 here), so
		// a replay may allocate while idle connections from earlier replays
		// still hold their slots, but never without bound.
		checked = false
		for i := 0; ; i++ {
			n := testing.AllocsPerRun(1, run)
			if n == 0 {
				break
			}
			if i == 12 {
				t.Fatalf("still %v allocations after %d replays", n, 2*i+2)
			}
		}
	})
}

// TestTCPPeerFix checks the fuzz harness's peer: with seq/ack taken from the
// stack's segments it completes a handshake and gets its data echoed, so
// FuzzStackTCP's seeds reach ESTABLISHED and the data path.
func TestTCPPeerFix(t *testing.T) {
	s, err := NewStack(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	s.EnableTCP(TCPConfig{Seed: 1})
	if err := s.ListenTCP(80, newFuzzEndpoint(1)); err != nil {
		t.Fatal(err)
	}
	link := NewChanLink(1500, 64)
	pf := &tcpPeerFix{}
	now := time.Unix(1_000_000, 0)
	var echoed []byte
	step := func(frame []byte) {
		pf.fix(frame, true)
		link.Inject(frame)
		now = now.Add(time.Millisecond)
		s.Poll(now, link)
		for link.Sent() > 0 {
			b, _ := link.Take()
			pf.learn(b)
			if ip := IPv4(Ethernet(b).Payload()); ip.Protocol() == ProtoTCP {
				echoed = append(echoed, TCP(ip.Payload()).Payload()...)
			}
		}
	}
	step(tcpSeedFrame(t, TCPFlagSYN, 1000, 0, ""))
	step(tcpSeedFrame(t, TCPFlagACK, 0, 0, ""))
	step(tcpSeedFrame(t, TCPFlagACK|TCPFlagPSH, 0, 0, "hello"))
	if string(echoed) != "hello" {
		t.Fatalf("echoed %q; TCP stats %+v", echoed, s.TCPStats())
	}
}
