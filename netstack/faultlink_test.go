package netstack

import (
	"bytes"
	"testing"
	"time"
)

// faultCtx is a stack behind a FaultLink on a ChanLink.
type faultCtx struct {
	*testCtx
	fl *FaultLink
}

func newFaultCtx(t *testing.T, rx, tx Faults, seed uint64) *faultCtx {
	c := newTestCtx(t, nil)
	return &faultCtx{testCtx: c, fl: NewFaultLink(c.link, rx, tx, seed)}
}

func (c *faultCtx) poll() { c.next = c.s.Poll(c.now, c.fl) }

// pingRound sends n pings from B (B learned first) in batches of 8 and
// returns every reply's sequence number in arrival order, after polling
// enough for held frames to come out.
func (c *faultCtx) pingRound(n int) (seqs []uint16, corrupt int) {
	c.t.Helper()
	collect := func() {
		for {
			b, ok := c.link.Take()
			if !ok {
				return
			}
			e := Ethernet(b)
			ip := IPv4(e.Payload())
			if e.Dst() != macB || e.Src() != macA || e.Type() != EtherTypeIPv4 || !ip.Valid() || !ip.HeaderChecksumOK() || !ICMPv4(ip.Payload()).Valid() || !ICMPv4(ip.Payload()).ChecksumOK() {
				corrupt++
				continue
			}
			seqs = append(seqs, ICMPv4(ip.Payload()).Seq())
		}
	}
	for i := 0; i < n; i++ {
		c.link.Inject(pingFromB(c.t, uint16(i), "payload"))
		if i%8 == 7 || i == n-1 {
			c.poll()
			collect()
			c.now = c.now.Add(time.Millisecond)
		}
	}
	for range reorderHold + 1 {
		c.poll()
		collect()
	}
	if st := c.s.Stats(); st.TxNoFrame != 0 {
		c.t.Fatalf("stack ran out of tx frames: %+v", st)
	}
	return seqs, corrupt
}

func TestFaultLinkTxLossDupCorrupt(t *testing.T) {
	c := newFaultCtx(t, Faults{}, Faults{Loss: 0.1, Dup: 0.05, Corrupt: 0.05}, 1)
	seqs, corrupt := c.pingRound(400)
	fs := c.fl.Stats
	if fs.TxLost == 0 || fs.TxDuplicated == 0 || fs.TxCorrupted == 0 {
		t.Fatalf("faults not applied: %+v", fs)
	}
	// Every reply the stack built arrives once, plus duplicates, minus losses.
	if got, want := uint64(len(seqs)+corrupt), 400-fs.TxLost+fs.TxDuplicated; got != want {
		t.Fatalf("arrived %d (corrupt %d), want %d: %+v", got, corrupt, want, fs)
	}
	// One flipped bit is always caught (by the checksums, or in the
	// Ethernet header by comparison, as a NIC's FCS would); duplicates are
	// copied before the flip, and lost frames are never corrupted.
	if uint64(corrupt) != fs.TxCorrupted {
		t.Fatalf("%d corrupt frames arrived, %d corrupted", corrupt, fs.TxCorrupted)
	}
	if _, tx := c.link.Lent(); tx != c.s.HeldTx() {
		t.Fatalf("%d tx frames lent, stack holds %d", tx, c.s.HeldTx())
	}
}

func TestFaultLinkReorder(t *testing.T) {
	c := newFaultCtx(t, Faults{}, Faults{Reorder: 0.2}, 2)
	seqs, corrupt := c.pingRound(200)
	if corrupt != 0 || len(seqs) != 200 {
		t.Fatalf("%d replies, %d corrupt: reordering must not lose frames", len(seqs), corrupt)
	}
	seen := make(map[uint16]bool)
	inversions := 0
	for i, s := range seqs {
		seen[s] = true
		if i > 0 && s < seqs[i-1] {
			inversions++
		}
	}
	if len(seen) != 200 || inversions == 0 || c.fl.Stats.TxReordered == 0 {
		t.Fatalf("distinct %d, inversions %d, stats %+v", len(seen), inversions, c.fl.Stats)
	}
	if _, h := c.fl.Held(); h != 0 {
		t.Fatalf("%d frames still held", h)
	}
}

func TestFaultLinkRx(t *testing.T) {
	c := newFaultCtx(t, Faults{Loss: 0.1, Reorder: 0.1, Corrupt: 0.1}, Faults{}, 3)
	seqs, corrupt := c.pingRound(300)
	fs := c.fl.Stats
	st := c.stats()
	if st.RxFrames != 300-fs.RxLost || fs.RxLost == 0 || fs.RxReordered == 0 || fs.RxCorrupted == 0 {
		t.Fatalf("stack rx %d, fault stats %+v", st.RxFrames, fs)
	}
	// A corrupted request is dropped by a check, except a flip in the
	// Ethernet source (no FCS in software): then the reply, intact, goes to
	// the wrong MAC and shows up as corrupt here.
	replies := uint64(len(seqs) + corrupt)
	if uint64(corrupt) > fs.RxCorrupted || replies > st.RxFrames || replies < st.RxFrames-fs.RxCorrupted {
		t.Fatalf("%d replies (%d misaddressed) for %d delivered, %d corrupted", replies, corrupt, st.RxFrames, fs.RxCorrupted)
	}
	if rx, _ := c.link.Lent(); rx != 0 {
		t.Fatalf("%d rx frames leaked", rx)
	}
}

func TestFaultLinkDeterministic(t *testing.T) {
	run := func() []byte {
		c := newFaultCtx(t, Faults{Loss: 0.1, Reorder: 0.1, Corrupt: 0.1}, Faults{Loss: 0.1, Dup: 0.1, Reorder: 0.1, Corrupt: 0.1}, 42)
		seqs, corrupt := c.pingRound(100)
		out := []byte{byte(corrupt)}
		for _, s := range seqs {
			out = append(out, byte(s))
		}
		return out
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatalf("same seed, different runs:\n%v\n%v", a, b)
	}
}

func TestFaultLinkNoAlloc(t *testing.T) {
	c := newFaultCtx(t, Faults{Loss: 0.1, Reorder: 0.1, Corrupt: 0.1}, Faults{Loss: 0.1, Dup: 0.1, Reorder: 0.1, Corrupt: 0.1}, 5)
	ping := pingFromB(t, 1, "payload")
	c.pingRound(16) // warm up
	n := testing.AllocsPerRun(200, func() {
		c.link.Inject(ping)
		c.poll()
		c.link.Discard()
	})
	if n != 0 {
		t.Fatalf("%v allocs per ping through a FaultLink", n)
	}
}
