package afxdp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// zcDriver plays the kernel and a zero-copy driver on the far side of a
// Socket's four rings, over plain memory, the way i40e, ice and mlx5 do in
// outline (veth has no zero-copy mode, so no test here can bind one):
//
//   - Receive: the NIC holds up to hwSize buffers, which the driver takes
//     from the fill ring in batches. A frame from the wire lands in a posted
//     buffer at off bytes from its chunk's start (XDP_PACKET_HEADROOM plus
//     the driver's own) and raises an interrupt; with no buffer posted the
//     NIC drops it and nothing wakes the driver.
//   - NAPI, after an interrupt or a wakeup: landed frames go to the rx ring,
//     buffers are posted again from the fill ring, and XDP_RING_NEED_WAKEUP is
//     set on the fill ring when the driver could not post them all, cleared
//     otherwise (i40e and ice do this).
//   - Transmit: NAPI takes up to txBudget descriptors from the tx ring and
//     writes their completions on a later pass, compBatch at a time. The tx
//     flag is cleared while the driver will come back by itself and set when
//     it goes idle; txFlagAlways leaves it set, as the kernel does for
//     drivers without need-wakeup support.
//   - Wakeups: the socket's fd is one end of a socketpair, so every sendto
//     and recvfrom the socket makes arrives at the test's end.
type zcDriver struct {
	t *testing.T
	s *Socket
	zcCase
	peer   int // the socketpair's other end: sendto arrives here
	tokens int // datagrams queued for the socket's recvfrom to take

	hw         []uint64          // buffers posted to the NIC (chunk addresses)
	landed     []Desc            // frames written by the NIC, not yet on the rx ring
	sent       []uint64          // transmitted, completion not yet written
	napiDue    bool              // an interrupt or a wakeup scheduled NAPI
	seq        uint32            // next frame number on the wire
	at         map[uint32]uint64 // where each frame not yet received landed
	nicDrops   int
	replied    map[uint32]int // answers the driver sent, by frame number
	unanswered int            // received with no tx frame free (a stack drops those), or silent
}

// zcCase is one driver's layout and pace.
type zcCase struct {
	name         string
	off          uint64 // a received frame's offset from its chunk's start
	hwSize       int
	txBudget     int
	compBatch    int
	txFlagAlways bool
	busyPoll     bool
	silent       bool // the shard answers nothing (an upload): no tx wakes the driver
}

const zcFrames, zcTxFrames = 256, 128

func newZCDriver(t *testing.T, c zcCase) *zcDriver {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	s := &Socket{fd: fds[0], frameSize: 2048, frameMask: ^uint64(2047), zeroCopy: true, busyPoll: c.busyPoll}
	s.umem = make([]byte, zcFrames*2048)
	s.fill = *must(newTestRing(t, zcFrames, false, true, 0))
	s.comp = *must(newTestRing(t, zcFrames, false, false, 0))
	s.rx = *must(newTestRing(t, zcFrames, true, false, 0))
	s.tx = *must(newTestRing(t, zcFrames, true, true, 0))
	s.stock(zcFrames, zcTxFrames)
	// The kernel starts with the tx flag set: tx must be woken the first time.
	s.tx.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	d := &zcDriver{t: t, s: s, zcCase: c, peer: fds[1], at: map[uint32]uint64{}, replied: map[uint32]int{}, napiDue: true}
	d.queueTokens()
	return d
}

func (d *zcDriver) queueTokens() {
	for ; d.tokens < 8; d.tokens++ {
		if err := unix.Sendto(d.peer, nil, 0, nil); err != nil {
			d.t.Fatal(err)
		}
	}
}

// wakeups returns the sendto and recvfrom calls the socket made since the
// last call; either schedules NAPI.
func (d *zcDriver) wakeups() (sends, recvs int) {
	for {
		if _, _, err := unix.Recvfrom(d.peer, nil, 0); err != nil {
			break
		}
		sends++
	}
	left := 0
	for {
		if _, _, err := unix.Recvfrom(d.s.fd, nil, 0); err != nil {
			break
		}
		left++
	}
	recvs, d.tokens = d.tokens-left, 0
	d.queueTokens()
	if sends+recvs > 0 {
		d.napiDue = true
	}
	return sends, recvs
}

func flag(r *ring) bool { return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0 }

func setFlag(r *ring, on bool) {
	if on {
		r.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	} else {
		r.flags.Store(0)
	}
}

// arrive puts n frames on the wire, each numbered in its first four bytes.
func (d *zcDriver) arrive(n int) {
	for range n {
		if len(d.hw) == 0 {
			// Dropped at the NIC: right only when the application had no
			// buffer to give, or NAPI is about to post the ones it gave.
			if fq := d.s.fill.outstanding(); fq > 0 && !d.napiDue {
				d.t.Fatalf("%s: frame %d dropped with %d buffers on the fill ring and the driver asleep: receive stalled", d.name, d.seq, fq)
			}
			d.nicDrops++
			d.seq++
			continue
		}
		chunk := d.hw[0]
		d.hw = d.hw[1:]
		size := 60 + int(d.seq*37%1400)
		f := d.s.umem[chunk+d.off : chunk+d.off+uint64(size)]
		binary.BigEndian.PutUint32(f, d.seq)
		d.at[d.seq] = chunk + d.off
		d.landed = append(d.landed, Desc{Addr: chunk + d.off, Len: uint32(size)})
		d.seq++
		d.napiDue = true
	}
}

// napi runs one NAPI pass if one is due.
func (d *zcDriver) napi() {
	if !d.napiDue {
		return
	}
	d.napiDue = false
	s := d.s
	// Completions of earlier passes, compBatch at a time.
	k := min(len(d.sent), d.compBatch)
	p := s.comp.producer.Load()
	for i, a := range d.sent[:k] {
		s.comp.addrs[(p+uint32(i))&s.comp.mask] = a
	}
	s.comp.producer.Store(p + uint32(k))
	d.sent = d.sent[k:]
	// Transmit.
	c := s.tx.consumer.Load()
	for n := 0; n < d.txBudget && c != s.tx.producer.Load(); n++ {
		t := s.tx.descs[c&s.tx.mask]
		d.replied[binary.BigEndian.Uint32(s.umem[t.Addr:])]++
		d.sent = append(d.sent, t.Addr)
		c++
	}
	s.tx.consumer.Store(c)
	// Receive: a full rx ring drops the frame and the buffer is posted again.
	p = s.rx.producer.Load()
	for _, f := range d.landed {
		if p-s.rx.consumer.Load() == s.rx.size {
			d.hw = append(d.hw, f.Addr&s.frameMask)
			continue
		}
		s.rx.descs[p&s.rx.mask] = f
		p++
	}
	s.rx.producer.Store(p)
	d.landed = d.landed[:0]
	// Post buffers from the fill ring.
	c = s.fill.consumer.Load()
	for ; len(d.hw) < d.hwSize && c != s.fill.producer.Load(); c++ {
		a := s.fill.addrs[c&s.fill.mask]
		if a&^s.frameMask != 0 {
			d.t.Fatalf("%s: fill ring address %#x is not a chunk's start", d.name, a)
		}
		d.hw = append(d.hw, a)
	}
	s.fill.consumer.Store(c)
	setFlag(&s.fill, len(d.hw) < d.hwSize)
	// More to do: the driver comes back by itself (interrupt, budget).
	more := len(d.sent) > 0 || s.tx.outstanding() > 0
	d.napiDue = d.napiDue || more
	setFlag(&s.tx, d.txFlagAlways || !more)
}

// checkFrames finds every chunk exactly once: on a ring, posted, landed,
// being sent or on the free list.
func (d *zcDriver) checkFrames(when string) {
	s := d.s
	seen := make([]int, zcFrames)
	add := func(a uint64) { seen[a/2048]++ }
	for i := s.fill.consumer.Load(); i != s.fill.producer.Load(); i++ {
		add(s.fill.addrs[i&s.fill.mask])
	}
	for i := s.comp.consumer.Load(); i != s.comp.producer.Load(); i++ {
		add(s.comp.addrs[i&s.comp.mask])
	}
	for i := s.rx.consumer.Load(); i != s.rx.producer.Load(); i++ {
		add(s.rx.descs[i&s.rx.mask].Addr)
	}
	for i := s.tx.consumer.Load(); i != s.tx.producer.Load(); i++ {
		add(s.tx.descs[i&s.tx.mask].Addr)
	}
	for _, a := range d.hw {
		add(a)
	}
	for _, f := range d.landed {
		add(f.Addr)
	}
	for _, a := range d.sent {
		add(a)
	}
	for _, a := range s.free {
		add(a)
	}
	for c, n := range seen {
		if n != 1 {
			d.t.Fatalf("%s: %s: chunk %d found %d times", d.name, when, c, n)
		}
	}
}

// poll is one turn of a shard over the socket, in the order netstack's
// Stack.Poll drives AFXDPLink: receive up to two batches, answer each frame
// from a tx frame, release the received ones, then Kick and Complete. Each
// call that may wake the driver is checked against the flags it saw.
func (d *zcDriver) poll(rx, tx []Desc) {
	s := d.s
	for range 2 {
		want := s.rx.outstanding() == 0 && (flag(&s.fill) || d.busyPoll)
		n := s.Receive(rx)
		if _, r := d.wakeups(); r != b2i(want) {
			d.t.Fatalf("%s: Receive made %d recvfrom calls, want %d (rx empty and fill flag %v)", d.name, r, b2i(want), flag(&s.fill))
		}
		// With the driver slow to complete, tx frames run short: those
		// frames go unanswered.
		m := 0
		if !d.silent {
			m = s.AllocTx(tx[:n])
			d.unanswered += n - m
		}
		for i, r := range rx[:n] {
			f := s.Frame(r.Addr, int(r.Len))
			sq := binary.BigEndian.Uint32(f)
			if d.at[sq] != r.Addr {
				d.t.Fatalf("%s: frame %d received at %#x, the driver wrote it at %#x", d.name, sq, r.Addr, d.at[sq])
			}
			delete(d.at, sq)
			if i < m {
				binary.BigEndian.PutUint32(s.Frame(tx[i].Addr, 64), sq)
				tx[i].Len = 64
			}
		}
		s.Transmit(tx[:m])
		s.Release(rx[:n])
		// Release may wake a driver starved of buffers.
		if _, r := d.wakeups(); r != b2i(n > 0 && flag(&s.fill)) {
			d.t.Fatalf("%s: Release made %d recvfrom calls, fill flag %v", d.name, r, flag(&s.fill))
		}
		if n < len(rx) {
			break
		}
	}
	// A kick only when the driver has frames to send or complete and the
	// flag (or busy polling) asks for the call.
	waiting := s.tx.outstanding() > 0 || len(d.sent) > 0
	want := waiting && (flag(&s.tx) || d.busyPoll)
	if err := s.Kick(); err != nil {
		d.t.Fatal(err)
	}
	if sends, _ := d.wakeups(); sends != b2i(want) {
		d.t.Fatalf("%s: Kick made %d sendto calls, want %d (tx flag %v, frames waiting %v)", d.name, sends, b2i(want), flag(&s.tx), waiting)
	}
	s.Complete()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestZeroCopyDriver runs the socket's data path against a played zero-copy
// driver through seeded bursts: every frame the NIC took is received once,
// at the driver's offset, and answered once; no chunk is lost or held twice;
// the fill ring is full again when the bursts stop; and every sendto and
// recvfrom happens exactly when a need-wakeup flag (or busy polling) asks.
func TestZeroCopyDriver(t *testing.T) {
	for _, c := range []zcCase{
		{name: "i40e-like", off: 256, hwSize: 96, txBudget: 16, compBatch: 8, txFlagAlways: true},
		{name: "mlx5-like", off: 256 + 64, hwSize: 64, txBudget: 64, compBatch: 32},
		{name: "odd offset", off: 258, hwSize: 48, txBudget: 8, compBatch: 1},
		// The NIC's ring (ethtool -G) holds more than the socket's rx
		// frames: the driver never has them all and keeps asking.
		{name: "NIC ring above rx frames", off: 256, hwSize: 160, txBudget: 32, compBatch: 16},
		{name: "receive only", off: 256, hwSize: 160, txBudget: 32, compBatch: 16, silent: true},
		{name: "busy polling", off: 256, hwSize: 96, txBudget: 16, compBatch: 8, busyPoll: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newZCDriver(t, c)
			s := d.s
			rx, tx := make([]Desc, 16), make([]Desc, 16)
			rng := rand.New(rand.NewPCG(14, uint64(c.hwSize)))
			for step := range 600 {
				// Bursts of up to two NIC rings' worth, with quiet
				// steps between: on average less than a shard's poll
				// takes, so it catches up.
				switch {
				case step >= 500:
				case rng.IntN(8) == 0:
					d.arrive(rng.IntN(2 * c.hwSize))
				default:
					d.arrive(rng.IntN(4))
				}
				d.napi()
				d.checkFrames(fmt.Sprintf("step %d after NAPI", step))
				d.poll(rx, tx)
				d.napi()
				d.checkFrames(fmt.Sprintf("step %d after poll", step))
			}
			received := int(d.seq) - d.nicDrops
			if len(d.at) != 0 || int(s.st.rxFrames) != received {
				t.Fatalf("%d of %d frames never received (%d received)", len(d.at), received, s.st.rxFrames)
			}
			for sq, n := range d.replied {
				if n != 1 {
					t.Fatalf("frame %d answered %d times", sq, n)
				}
			}
			if d.silent {
				d.unanswered = received
			}
			if len(d.replied)+d.unanswered != received {
				t.Fatalf("%d answers and %d unanswered for %d frames", len(d.replied), d.unanswered, received)
			}
			if fq := int(s.fill.outstanding()) + len(d.hw); fq != zcFrames-zcTxFrames || s.FreeFrames() != zcTxFrames {
				t.Fatalf("idle: %d rx frames posted or on the fill ring, %d free; want %d and %d", fq, s.FreeFrames(), zcFrames-zcTxFrames, zcTxFrames)
			}
			if s.st.rxBadDesc+s.st.txBadDesc+s.st.txRingFull+s.st.fillBadAddr+s.st.freeBad != 0 {
				t.Fatalf("counters: %+v", s.st)
			}
			t.Logf("%d frames, %d dropped at the NIC, %d unanswered, %d sendto, %d recvfrom", d.seq, d.nicDrops, d.unanswered, s.st.kicks, s.st.rxWakeups)
		})
	}
}

// TestFillWakesStarvedDriver: Fill, like Release, makes one recvfrom when it
// gives frames to a driver that asked for them, and none otherwise.
func TestFillWakesStarvedDriver(t *testing.T) {
	d := newZCDriver(t, zcCase{name: "fill", hwSize: 1})
	s := d.s
	for _, c := range []struct {
		flag  bool
		n     int
		wakes int
	}{{true, 4, 1}, {false, 4, 0}, {true, 0, 0}} {
		setFlag(&s.fill, c.flag)
		s.Fill(c.n)
		if _, r := d.wakeups(); r != c.wakes {
			t.Errorf("Fill(%d) with the flag %v: %d recvfrom calls, want %d", c.n, c.flag, r, c.wakes)
		}
	}
}
