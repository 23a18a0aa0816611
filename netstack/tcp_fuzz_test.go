package netstack

import (
	"encoding/binary"
	"testing"
	"time"
)

// FuzzTCPLayer feeds arbitrary segments, clock steps and app actions to a
// layer with live connections in many states: it must not panic, its
// invariants must hold after every step, and its memory stays bounded
// (pools never exceed their configured sizes).
//
// The input is a sequence of records; the first byte of each says what it is:
//
//	0: raw segment: [0, conn, len, bytes...]; ports and checksum are fixed
//	   up so that it reaches the connection's state machine
//	1: crafted segment: [1, conn, flags, seqoff(2), ackoff(2), win(2), len]
//	   with seq and ack relative to RCV.NXT and SND.UNA
//	2: clock: [2, n] advances n*7 ms and runs timers, with flight credit
//	   for (n>>5)-1 new flights (-1: no limit)
//	3: app: [3, conn, op]: write output, close, block or unblock input
//
// Only the first fuzzTCPLayerMax bytes are read. The fuzzer minimizes each
// new input before it fuzzes on, and hands out no other work meanwhile;
// an op stream shifts its framing when a byte goes, so most candidates fail
// and minimizing takes time quadratic in the length: inputs of 1-3 KB ran
// into the minimizer's 60 s limit, and the fuzzer sat at 0 execs/s for
// most of a 2-minute run. The bytes after the limit change nothing, so the
// minimizer cuts them first, at once.
func FuzzTCPLayer(f *testing.F) {
	f.Add([]byte{1, 0, A | P, 0, 0, 0, 0, 0xff, 0xff, 20, 2, 10, 1, 0, A, 0, 0, 0, 4, 0xff, 0xff, 0})
	f.Add([]byte{3, 0, 0, 2, 200, 1, 0, A, 0, 100, 0, 0, 0xff, 0xff, 50, 1, 0, A, 0, 0, 0, 0, 0xff, 0xff, 30})
	f.Add([]byte{1, 1, R, 0, 0, 0, 0, 0, 0, 0, 1, 2, S, 0, 0, 0, 0, 0, 0, 0, 2, 255, 2, 255, 2, 255})
	f.Add([]byte{0, 3, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x12, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{1, 5, S, 0, 0, 0, 0, 0x10, 0, 0, 1, 5, A, 0, 1, 0, 1, 0x10, 0, 10, 2, 100})
	f.Add([]byte{3, 0, 2, 1, 0, A | F, 0, 0, 0, 0, 0xff, 0xff, 0, 2, 150, 3, 0, 1, 2, 50})
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), fuzzTCPLayerMax)]
		cfg := tcpTestConfig()
		cfg.MaxConns, cfg.SynBacklog, cfg.RcvBufs, cfg.RcvBuf = 12, 2, 4, 4096
		cfg.KeepIdle, cfg.KeepInterval = 5*time.Second, time.Second
		x := newTCPTest(t, cfg)
		x.sink.keep = false
		states := []tcpState{tcpEstablished, tcpFinWait1, tcpFinWait2, tcpCloseWait, tcpLastAck, tcpClosing, tcpTimeWait}
		keys := make([]tcpKey, 0, 8)
		apps := make([]*testApp, 0, 8)
		for i, s := range states {
			x.key.rport = uint16(40000 + i)
			c, app := x.inState(s)
			c.sackOK, c.tsOK = i%2 == 0, i%3 == 0
			if s == tcpEstablished {
				app.write("response bytes waiting for a window")
			}
			keys = append(keys, x.key)
			apps = append(apps, app)
		}
		keys = append(keys, tcpKey{raddr: ip4(tRemote), laddr: ip4(tLocal), rport: 41000, lport: tLPort}) // LISTEN
		apps = append(apps, nil)
		pr := &peer{b: make([]byte, 8192), src: tRemote}

		for len(data) > 0 {
			op := data[0] % 4
			data = data[1:]
			take := func(n int) []byte {
				if len(data) < n {
					b := make([]byte, n)
					copy(b, data)
					data = nil
					return b
				}
				b := data[:n]
				data = data[n:]
				return b
			}
			switch op {
			case 0:
				h := take(2)
				k := keys[int(h[0])%len(keys)]
				n := int(h[1])
				raw := append([]byte(nil), take(n)...)
				if len(raw) >= 4 {
					binary.BigEndian.PutUint16(raw[0:], k.rport)
					binary.BigEndian.PutUint16(raw[2:], k.lport)
				}
				if len(raw) >= 18 {
					TCP(raw).SetChecksum(0)
					TCP(raw).SetChecksum(tcpChecksum(k.raddr, k.laddr, raw))
				}
				x.l.input(x.now, 0, tRemote, tLocal, raw)
			case 1:
				h := take(10)
				k := keys[int(h[0])%len(keys)]
				fl := TCPFields{SrcPort: k.rport, DstPort: k.lport, Flags: h[1], Window: binary.BigEndian.Uint16(h[6:])}
				seq, ack := uint32(tIRS+1), uint32(tISS+1)
				if i := x.l.table.lookup(k); i >= 0 {
					c := x.l.conns[i]
					seq, ack = uint32(c.rcvNxt), uint32(c.sndUna)
				}
				fl.Seq = seq + uint32(int16(binary.BigEndian.Uint16(h[2:])))
				fl.Ack = ack + uint32(int16(binary.BigEndian.Uint16(h[4:])))
				if h[8]&1 != 0 {
					fl.SACKPermitted, fl.MSS = true, 1000
				}
				if h[8]&2 != 0 {
					fl.NSACK, fl.SACK[0] = 1, TCPSACKBlock{ack + uint32(h[8]), ack + uint32(h[8])*20}
				}
				if h[8]&4 != 0 {
					fl.HasTimestamp, fl.TSVal = true, uint32(h[8])
				}
				payload := make([]byte, int(h[9])*16)
				x.l.input(x.now, 0, tRemote, tLocal, pr.segment(&fl, payload))
			case 2:
				h := take(1)
				x.l.flightCredit(int(h[0]>>5) - 1)
				x.advance(time.Duration(h[0]) * 7 * time.Millisecond)
			case 3:
				h := take(2)
				i := int(h[0]) % len(keys)
				if apps[i] == nil || x.l.table.lookup(keys[i]) < 0 {
					continue
				}
				a := apps[i]
				switch h[1] % 4 {
				case 0:
					a.write(string(make([]byte, 3000)))
				case 1:
					a.closing = true
				case 2:
					a.room = 0
				case 3:
					a.room = -1
				}
				c := x.l.conns[x.l.table.lookup(keys[i])]
				x.l.output(c)
				x.l.schedule(c)
			}
			if debugFuzz {
				t.Logf("op %d now %v", op, x.now)
			}
			checkTCPInvariants(t, x.l)
		}
		// Run every timer out: everything must close in bounded time.
		for i := 0; i < 64 && x.l.stats.Conns > 0; i++ {
			x.advance(30 * time.Second)
			if debugFuzz {
				t.Logf("drain %d now %v", i, x.now)
			}
			checkTCPInvariants(t, x.l)
		}
		for _, a := range apps {
			if a != nil {
				a.closing = true
			}
		}
	})
}

// fuzzTCPLayerMax bounds FuzzTCPLayer's input: a few dozen records.
const fuzzTCPLayerMax = 384

// checkTCPInvariants asserts the layer's bookkeeping is consistent. It is
// no t.Helper: it runs after every record of every fuzz input, and Helper's
// stack walk was a third of the fuzz target's time.
func checkTCPInvariants(t *testing.T, l *tcpLayer) {
	n, synRcvd, timeWaits := 0, 0, 0
	for _, s := range l.table.slots {
		if s.idx == 0 {
			continue
		}
		n++
		c := l.conns[s.idx-1]
		if c.key != s.key || c.state == tcpClosed {
			t.Fatalf("table slot %v -> conn %v in %v", s.key, c.key, c.state)
		}
		switch c.state {
		case tcpSynRcvd:
			synRcvd++
		case tcpTimeWait:
			timeWaits++
		}
		if c.state != tcpSynSent && c.state != tcpSynRcvd {
			if c.sndNxt.lt(c.sndUna) || c.sndMax.lt(c.sndNxt) {
				t.Fatalf("%v: una %d nxt %d max %d", c.state, c.sndUna, c.sndNxt, c.sndMax)
			}
		}
		end := c.rcvDataEnd()
		if end.lt(c.appSeq) || end.diff(c.appSeq) > l.rcvSpace(c) {
			t.Fatalf("%v: appSeq %d rcvNxt %d", c.state, c.appSeq, c.rcvNxt)
		}
		if c.appSeq != end && c.rb == nil && c.state != tcpTimeWait {
			t.Fatalf("%v: %d bytes held without a buffer", c.state, end.diff(c.appSeq))
		}
		if len(c.ooo) > 0 && cap(c.ooo) != oooRanges(len(c.rb)) {
			t.Fatalf("ooo table of %d ranges", cap(c.ooo))
		}
		for i, r := range c.ooo {
			if !r.l.lt(r.r) || !r.l.gt(c.rcvNxt) || c.rb == nil || r.r.gt(c.appSeq.add(uint32(len(c.rb)))) {
				t.Fatalf("%v: ooo range %v rcvNxt %d appSeq %d", c.state, r, c.rcvNxt, c.appSeq)
			}
			if i > 0 && !c.ooo[i-1].r.lt(r.l) {
				t.Fatalf("ooo ranges not sorted/disjoint: %v", c.ooo)
			}
		}
		if c.nsacked > 0 && c.tx == nil {
			t.Fatalf("%d sacked ranges and no scoreboard", c.nsacked)
		}
		for _, r := range c.sackedRanges() {
			if !r.l.lt(r.r) || r.l.lt(c.sndUna) || r.r.gt(c.sndMax) {
				t.Fatalf("sacked range %v una %d max %d", r, c.sndUna, c.sndMax)
			}
		}
		if at := l.timers.pos[c.id]; (at != 0) != (c.deadline != 0) || (at != 0 && l.timers.h[at-1] != tcpTimer{c.deadline, c.id}) {
			t.Fatalf("%v: heap position %d deadline %d", c.state, at, c.deadline)
		}
		if c.state != tcpTimeWait && c.state != tcpClosed && c.state != tcpSynRcvd && c.state != tcpSynSent &&
			c.deadline == 0 && c.sndMax != c.sndUna {
			t.Fatalf("%v port %d: data in flight and no timer (una %d max %d rtx %d ack %d ka %d)", c.state, c.key.rport, c.sndUna, c.sndMax, c.rtxAt, c.ackAt, c.kaAt)
		}
	}
	if n != l.table.n || n != l.stats.Conns || synRcvd != l.stats.SynRcvd || timeWaits != l.stats.TimeWaits {
		t.Fatalf("table %d/%d conns %d synrcvd %d/%d timewait %d/%d", n, l.table.n, l.stats.Conns,
			synRcvd, l.stats.SynRcvd, timeWaits, l.stats.TimeWaits)
	}
	tw, prev := 0, int32(-1)
	for id := l.twHead; id >= 0; id = l.conns[id].twNext {
		if c := l.conns[id]; c.state != tcpTimeWait || c.twPrev != prev || tw > len(l.conns) {
			t.Fatalf("TIME-WAIT list broken at %d", id)
		}
		prev = id
		tw++
	}
	if tw != l.stats.TimeWaits || prev != l.twTail {
		t.Fatalf("TIME-WAIT list has %d, gauge %d", tw, l.stats.TimeWaits)
	}
	for i := 1; i < len(l.timers.h); i++ {
		if l.timers.h[(i-1)/heapArity].at > l.timers.h[i].at {
			t.Fatal("timer heap order broken")
		}
	}
	if len(l.conns) > l.cfg.MaxConns || l.rbufsMade > l.cfg.RcvBufs || len(l.rbufs)+len(l.rbufsSmall)+countRB(l) != l.rbufsMade {
		t.Fatalf("pools: %d conns made, %d buffers made, %d+%d free", len(l.conns), l.rbufsMade, len(l.rbufs), len(l.rbufsSmall))
	}
	bytes := 0
	for _, b := range l.rbufs {
		bytes += rcvBufBytes(len(b.rb))
	}
	for _, b := range l.rbufsSmall {
		bytes += rcvBufBytes(len(b.rb))
	}
	for _, c := range l.conns {
		if c.rb != nil {
			bytes += rcvBufBytes(len(c.rb))
		}
	}
	if b := l.cfg.Budget; bytes != l.rbufBytes || (b != nil && (b.Used() != bytes || b.Limit() > 0 && b.Used() > b.Limit())) {
		t.Fatalf("buffers of %d bytes, counted %d, budget %+v", bytes, l.rbufBytes, l.cfg.Budget.Stats())
	}
	// A conn holds a RACK ring exactly while it has records.
	lent := 0
	for _, c := range l.conns {
		if (c.tx != nil) != (c.ntx > 0) {
			t.Fatalf("port %d: ring held %v with %d records", c.key.rport, c.tx != nil, c.ntx)
		}
		if c.tx != nil {
			lent++
		}
	}
	if len(l.txRings)+lent != l.txMade || l.txMade > len(l.conns) {
		t.Fatalf("pools: %d rings made, %d free, %d lent", l.txMade, len(l.txRings), lent)
	}
	// Every conn without a buffer shares noRcvBuf: nothing may write it.
	if nb := &l.noRcvBuf; nb.rb != nil || nb.rbHead != 0 || nb.ooo != nil || nb.nSACKHist != 0 || nb.sackHist != [tcpSACKHist]seqnum{} {
		t.Fatalf("the shared empty receive buffer was written: %+v", *nb)
	}
	// The flight-credit FIFO: an entry per slot with a turn, and a live
	// conn whose turn it is counts as queued (woken).
	q, turns := &l.held, 0
	for id, gen := range q.turn {
		if gen == 0 {
			continue
		}
		turns++
		if c := l.conns[id]; c.gen == gen && c.state != tcpClosed && !c.woken {
			t.Fatalf("port %d waits for credit, not marked woken", c.key.rport)
		}
	}
	if q.n > len(q.ring) || turns != q.n {
		t.Fatalf("held FIFO of %d entries, %d turns", q.n, turns)
	}
	for i := range q.n {
		if q.turn[q.ring[(q.head+i)%len(q.ring)]] == 0 {
			t.Fatal("held FIFO entry without a turn")
		}
	}
}

func countRB(l *tcpLayer) int {
	n := 0
	for _, c := range l.conns {
		if c.rb != nil {
			n++
		}
	}
	return n
}

const debugFuzz = false
