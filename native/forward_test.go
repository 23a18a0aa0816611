package native

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/netstack"
)

// TestToeplitzVectors checks the hash, bit by bit and by table, against the
// IPv4-with-TCP vectors of Microsoft's "Verifying the RSS Hash Calculation".
func TestToeplitzVectors(t *testing.T) {
	h := newFlowHash(fixedKey[:])
	for _, v := range []struct {
		src, dst string
		want     uint32
	}{
		{"66.9.149.187:2794", "161.142.100.80:1766", 0x51ccc178},
		{"199.92.111.2:14230", "65.69.140.83:4739", 0xc626b0ea},
		{"24.19.198.95:12898", "12.22.207.184:38024", 0x5c2b394a},
		{"38.27.205.30:48228", "209.142.163.6:2217", 0xafc7327f},
		{"153.39.163.191:44251", "202.188.127.2:1303", 0x10e828a2},
	} {
		src, dst := netip.MustParseAddrPort(v.src), netip.MustParseAddrPort(v.dst)
		s, d := src.Addr().As4(), dst.Addr().As4()
		addrs := append(s[:], d[:]...)
		ports := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, src.Port()), dst.Port())
		if got := Toeplitz(fixedKey[:], append(addrs, ports...)); got != v.want {
			t.Errorf("toeplitz(%s -> %s) = %#08x, want %#08x", v.src, v.dst, got, v.want)
		}
		if got := h.sum(addrs, ports); got != v.want {
			t.Errorf("flowHash(%s -> %s) = %#08x, want %#08x", v.src, v.dst, got, v.want)
		}
	}
}

// tcpFrame is an Ethernet frame carrying a TCP/IPv4 segment from src to
// dst with payload (checksums left 0: routing reads no checksum).
func tcpFrame(src, dst netip.AddrPort, payload string) []byte {
	b := make([]byte, 14+20+20+len(payload))
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[9] = 0x45, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(40+len(payload)))
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[20:], src.Port())
	binary.BigEndian.PutUint16(ip[22:], dst.Port())
	ip[32] = 5 << 4
	copy(ip[40:], payload)
	return b
}

func arpFrame(op uint16) []byte {
	b := make([]byte, 14+28)
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	binary.BigEndian.PutUint16(b[20:], op)
	return b
}

var (
	server = netip.MustParseAddrPort("198.18.0.1:80")
	client = netip.MustParseAddr("198.18.0.2")
)

// portFor is a client port whose flow to the server software RSS gives
// shard want.
func portFor(t testing.TB, f *forwarding, want int) uint16 {
	for p := uint16(40000); p < 41000; p++ {
		if f.flowShard(client.As4(), server.Addr().As4(), p, server.Port()) == want {
			return p
		}
	}
	t.Fatalf("no port of 1000 hashes to shard %d", want)
	return 0
}

// Every segment of a flow goes to one shard, and flows spread over all;
// ARP replies go to every shard; ARP requests, ICMP and fragments stay
// with the queue that received them.
func TestForwardRoute(t *testing.T) {
	f, err := newForwarding(4, 1, 1500, fixedKey[:], "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	count := make([]int, 4)
	for p := uint16(40000); p < 40400; p++ {
		src := netip.AddrPortFrom(client, p)
		got := f.route(tcpFrame(src, server, ""))
		if again := f.route(tcpFrame(src, server, "data")); again != got {
			t.Fatalf("port %d: SYN to shard %d, data to %d", p, got, again)
		}
		if got != f.flowShard(client.As4(), server.Addr().As4(), p, server.Port()) {
			t.Fatalf("port %d: route %d disagrees with flowShard", p, got)
		}
		count[got]++
	}
	for s, n := range count {
		if n < 400/4/2 {
			t.Errorf("shard %d got %d of 400 flows: %v", s, n, count)
		}
	}
	frag := tcpFrame(netip.AddrPortFrom(client, 40000), server, "")
	frag[14+6] = 0x20 // more fragments
	icmp := tcpFrame(netip.AddrPortFrom(client, 40000), server, "")
	icmp[14+9] = 1
	for name, tc := range map[string]struct {
		b    []byte
		want int
	}{
		"arp reply":   {arpFrame(2), routeAll},
		"arp request": {arpFrame(1), routeHere},
		"icmp":        {icmp, routeHere},
		"fragment":    {frag, routeHere},
		"short":       {make([]byte, 10), routeHere},
	} {
		if got := f.route(tc.b); got != tc.want {
			t.Errorf("%s: route %d, want %d", name, got, tc.want)
		}
	}
}

// The ring hands frames over in order, with their receive times, refuses
// when full, and reuses a slot only after release.
func TestFrameRing(t *testing.T) {
	r := newFrameRing(3, 64)      // rounds up to 4
	const t0 = int64(1_000_000e9) // a receive time, as a link reports it
	for i := range 4 {
		s := r.next()
		if s == nil {
			t.Fatalf("slot %d refused", i)
		}
		r.push(copy(s, []byte{byte(i), byte(i)}), t0+int64(i))
	}
	if r.next() != nil {
		t.Fatal("a full ring gave a slot")
	}
	if b, _ := r.take(); b != nil {
		t.Fatal("took a frame before publish")
	}
	r.publish()
	for i := range 4 {
		if b, at := r.take(); !bytes.Equal(b, []byte{byte(i), byte(i)}) || at != t0+int64(i) {
			t.Fatalf("frame %d: %v at %v", i, b, at)
		}
	}
	if b, _ := r.take(); b != nil || r.next() != nil {
		t.Fatal("taken but not released: the ring must be empty to the consumer and full to the producer")
	}
	r.release(4)
	if r.next() == nil || r.len() != 0 {
		t.Fatalf("released: no slot, or %d left", r.len())
	}
}

// TestFrameRingConcurrent moves a bounded count of frames between two
// goroutines; none is lost, duplicated, reordered or torn (run with -race).
func TestFrameRingConcurrent(t *testing.T) {
	const n = 200000
	r := newFrameRing(64, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(0); i < n; {
			s := r.next()
			if s == nil {
				r.publish()
				continue
			}
			binary.LittleEndian.PutUint64(s, i)
			binary.LittleEndian.PutUint64(s[8:], ^i)
			r.push(16, 0)
			i++
			if i%7 == 0 {
				r.publish()
			}
		}
		r.publish()
	}()
	for i := uint64(0); i < n; {
		b, _ := r.take()
		if b == nil {
			continue
		}
		if v := binary.LittleEndian.Uint64(b); v != i || binary.LittleEndian.Uint64(b[8:]) != ^i {
			t.Fatalf("frame %d: got %d", i, v)
		}
		i++
		r.release(1)
	}
	wg.Wait()
}

// fwdPair is software forwarding between shard 0, which owns the one queue
// (a ChanLink playing the socket), and shard 1, which has none.
type fwdPair struct {
	f            *forwarding
	nic          *netstack.ChanLink
	owner, other *fwdLink
	ost, pst     QueueStats
	fs           []netstack.Frame
}

func newFwdPair(t testing.TB) *fwdPair {
	f, err := newForwarding(2, 1, 1500, fixedKey[:], "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	p := &fwdPair{f: f, nic: netstack.NewChanLink(1500, 256), fs: make([]netstack.Frame, 64)}
	f.clock = p.nic.RxClock() // the ChanLink plays the socket
	p.owner = f.newFwdLink(0, p.nic, 1500, 64, 0, &p.ost)
	p.other = f.newFwdLink(1, nil, 1500, 64, 128, &p.pst)
	return p
}

// rx is one receive batch of l, handed to fn and given back.
func (p *fwdPair) rx(l *fwdLink, fn func(b []byte)) int {
	n := l.RxBatch(p.fs, nil)
	for _, fr := range p.fs[:n] {
		fn(fr.Buf)
	}
	l.RxDone(p.fs[:n])
	return n
}

// reply sends one frame from l holding b.
func (p *fwdPair) reply(l *fwdLink, b []byte) {
	if l.TxAlloc(p.fs[:1]) != 1 {
		panic("no tx frame")
	}
	p.fs[0].Buf = p.fs[0].Buf[:copy(p.fs[0].Buf, b)]
	l.TxSubmit(p.fs[:1])
	l.Flush()
}

// A segment of shard 1's flow, received on shard 0's queue, reaches shard
// 1 and only it; its reply leaves through shard 0's queue; shard 0's own
// flow stays with it; an ARP reply reaches both; every frame lent comes
// back.
func TestForwardHandOff(t *testing.T) {
	p := newFwdPair(t)
	mine := tcpFrame(netip.AddrPortFrom(client, portFor(t, p.f, 0)), server, "to 0")
	theirs := tcpFrame(netip.AddrPortFrom(client, portFor(t, p.f, 1)), server, "to 1")
	for _, b := range [][]byte{mine, theirs, arpFrame(2)} {
		p.nic.Inject(b)
	}
	var got0, got1 [][]byte
	p.f.wake[1].drowse() // shard 1 found nothing to do: the owner must wake it
	if n := p.rx(p.owner, func(b []byte) { got0 = append(got0, bytes.Clone(b)) }); n != 2 {
		t.Fatalf("owner kept %d frames, want 2 (its own and the ARP reply)", n)
	}
	var ev [8]byte
	if n, err := unix.Read(p.f.wake[1].fd, ev[:]); n != 8 || err != nil || p.f.wake[1].asleep.Load() {
		t.Fatalf("shard 1 not woken: eventfd read %d, %v; asleep %v", n, err, p.f.wake[1].asleep.Load())
	}
	if n := p.rx(p.other, func(b []byte) { got1 = append(got1, bytes.Clone(b)) }); n != 2 {
		t.Fatalf("shard 1 received %d frames, want 2", n)
	}
	if !bytes.Equal(got0[0], mine) || !bytes.Equal(got1[0], theirs) || !bytes.Equal(got1[1], arpFrame(2)) {
		t.Fatalf("owner got %x, shard 1 got %x", got0, got1)
	}
	if rx, _ := p.nic.Lent(); rx != 0 {
		t.Fatalf("%d queue frames still lent after RxDone", rx)
	}
	p.reply(p.other, []byte("reply from 1"))
	if _, ok := p.nic.Take(); ok {
		t.Fatal("sent before the owner polled")
	}
	p.owner.Flush()
	if b, ok := p.nic.Take(); !ok || string(b) != "reply from 1" {
		t.Fatalf("owner sent %q %v, want shard 1's reply", b, ok)
	}
	if p.ost.FwdOut != 2 || p.pst.FwdIn != 2 || p.pst.FwdTxOut != 1 || p.ost.FwdTxSent != 1 || p.ost.FwdRingFull != 0 {
		t.Errorf("owner %+v, shard 1 %+v", p.ost, p.pst)
	}
	if len(p.other.free) != 128 {
		t.Errorf("shard 1 pool has %d of 128 buffers free", len(p.other.free))
	}
}

// A forwarded frame keeps its receive time.
func TestForwardRxTime(t *testing.T) {
	p := newFwdPair(t)
	theirs := tcpFrame(netip.AddrPortFrom(client, portFor(t, p.f, 1)), server, "to 1")
	at := time.Unix(1_000_000, 1234)
	p.nic.InjectAt(theirs, at)
	if n := p.rx(p.owner, func([]byte) {}); n != 0 {
		t.Fatalf("owner kept %d frames", n)
	}
	got := make([]int64, len(p.fs))
	n := p.other.RxBatch(p.fs, got)
	if gotAt := p.other.RxClock().Add(time.Duration(got[0])); n != 1 || !gotAt.Equal(at) {
		t.Fatalf("shard 1 received %d frames, the first at %v; want 1 at %v", n, gotAt, at)
	}
	p.other.RxDone(p.fs[:n])
}

// A full ring drops (counted) instead of blocking the queue's owner, and a
// queueless shard whose ring to its owner is full keeps its frames until
// there is room.
func TestForwardBackpressure(t *testing.T) {
	p := newFwdPair(t)
	theirs := tcpFrame(netip.AddrPortFrom(client, portFor(t, p.f, 1)), server, "x")
	sent := 0
	for sent < p.f.ringSize+10 {
		for range 64 {
			p.nic.Inject(theirs)
			sent++
		}
		p.rx(p.owner, func([]byte) {})
	}
	if p.ost.FwdOut != uint64(p.f.ringSize) || p.ost.FwdRingFull != uint64(sent-p.f.ringSize) {
		t.Fatalf("forwarded %d, dropped %d of %d into a ring of %d", p.ost.FwdOut, p.ost.FwdRingFull, sent, p.f.ringSize)
	}
	other := p.f.newFwdLink(1, nil, 1500, 64, p.f.ringSize+8, &p.pst) // pool larger than the ring
	for range p.f.ringSize + 8 {
		p.reply(other, []byte("r"))
	}
	if len(other.queue) != 8 || !other.ready() {
		t.Fatalf("%d frames wait for the ring, want 8", len(other.queue))
	}
	p.owner.Flush() // sends what the socket has frames for
	other.Flush()
	if len(other.queue) != 0 {
		t.Fatalf("%d frames still wait after the owner made room", len(other.queue))
	}
}

// The forwarding path allocates nothing: the owner's receive and hand-off,
// the other shard's receive and send, the owner's send for it.
func TestForwardAllocs(t *testing.T) {
	p := newFwdPair(t)
	mine := tcpFrame(netip.AddrPortFrom(client, portFor(t, p.f, 0)), server, "to 0")
	theirs := tcpFrame(netip.AddrPortFrom(client, portFor(t, p.f, 1)), server, "to 1")
	reply := []byte("reply")
	allocs := testing.AllocsPerRun(200, func() {
		for range 16 {
			p.nic.Inject(mine)
			p.nic.Inject(theirs)
		}
		p.rx(p.owner, func([]byte) {})
		p.rx(p.other, func([]byte) {})
		for range 16 {
			p.reply(p.other, reply)
		}
		p.owner.Flush()
		p.nic.Discard()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
	if p.ost.FwdRingFull != 0 || p.pst.FwdIn == 0 || p.ost.FwdTxSent != p.pst.FwdTxOut {
		t.Errorf("owner %+v, shard 1 %+v", p.ost, p.pst)
	}
}

// BenchmarkForwardRoute is the hash and table look-up of one segment.
func BenchmarkForwardRoute(b *testing.B) {
	f, err := newForwarding(2, 1, 1500, fixedKey[:], "")
	if err != nil {
		b.Fatal(err)
	}
	defer f.close()
	fr := tcpFrame(netip.AddrPortFrom(client, 40000), server, "GET / HTTP/1.1\r\n\r\n")
	b.ReportAllocs()
	s := 0
	for b.Loop() {
		s += f.route(fr)
	}
	_ = s
}

// BenchmarkForwardFrame is one request frame in and one reply frame of the
// same size out, on one goroutine: of the queue owner's own flow (the
// baseline: no copy but the ChanLink's), and of the other shard's flow
// (the owner copies it into the ring, the other shard takes it and sends
// the reply through its pool and the ring back, the owner copies that into
// a queue frame). The difference is forwarding's cost per frame pair.
func BenchmarkForwardFrame(b *testing.B) {
	for _, to := range []int{0, 1} {
		name := map[int]string{0: "own flow", 1: "forwarded"}[to]
		b.Run(name, func(b *testing.B) {
			p := newFwdPair(b)
			fr := tcpFrame(netip.AddrPortFrom(client, portFor(b, p.f, to)), server, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			l := p.owner
			if to == 1 {
				l = p.other
			}
			const batch = 32
			b.ReportAllocs()
			b.SetBytes(int64(len(fr)))
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				for range batch {
					p.nic.Inject(fr)
				}
				if to == 1 {
					p.rx(p.owner, func([]byte) {})
				}
				n := l.RxBatch(p.fs, nil)
				l.TxAlloc(p.fs[n : 2*n])
				for j := range n {
					p.fs[n+j].Buf = p.fs[n+j].Buf[:copy(p.fs[n+j].Buf, p.fs[j].Buf)]
				}
				l.TxSubmit(p.fs[n : 2*n])
				l.RxDone(p.fs[:n])
				l.Flush()
				if to == 1 {
					p.owner.Flush()
				}
				p.nic.Discard()
			}
		})
	}
}

// veth has no RSS: the key is the fixed one, and the start-up line says why.
func TestReadRSSKeyVeth(t *testing.T) {
	pair := newPair(t, "nk")
	if key, why := readRSSKey(pair.ServerIf); key != nil || why != "the driver shows none" {
		t.Errorf("veth: key %x, %q; want none and why", key, why)
	}
}

// With 2 queues and 4 shards, each owner hands every other shard its
// flows (the other owner too), and shards 2 and 3 send through owners 0
// and 1.
func TestForwardTwoQueuesFourShards(t *testing.T) {
	f, err := newForwarding(4, 2, 1500, fixedKey[:], "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	nics := []*netstack.ChanLink{netstack.NewChanLink(1500, 256), netstack.NewChanLink(1500, 256)}
	st := make([]QueueStats, 4)
	links := make([]*fwdLink, 4)
	for i := range links {
		var xsk netstack.Link
		if i < 2 {
			xsk = nics[i]
		}
		links[i] = f.newFwdLink(i, xsk, 1500, 64, 64, &st[i])
	}
	fs := make([]netstack.Frame, 64)
	for q, nic := range nics {
		for s := range 4 {
			nic.Inject(tcpFrame(netip.AddrPortFrom(client, portFor(t, f, s)), server, fmt.Sprintf("q%d s%d", q, s)))
		}
	}
	got := make([][]string, 4)
	for range 2 { // owners first, then every shard again: all frames are in by then
		for s, l := range links {
			n := l.RxBatch(fs, nil)
			for _, fr := range fs[:n] {
				got[s] = append(got[s], string(fr.Buf[54:]))
			}
			l.RxDone(fs[:n])
		}
	}
	for s := range links {
		slices.Sort(got[s])
		if want := []string{fmt.Sprintf("q0 s%d", s), fmt.Sprintf("q1 s%d", s)}; !slices.Equal(got[s], want) {
			t.Errorf("shard %d received %q, want %q", s, got[s], want)
		}
	}
	for _, l := range links[2:] {
		if l.TxAlloc(fs[:1]) != 1 {
			t.Fatal("no tx buffer")
		}
		fs[0].Buf = fs[0].Buf[:copy(fs[0].Buf, fmt.Sprintf("from %d", l.self))]
		l.TxSubmit(fs[:1])
		l.Flush()
	}
	for q, nic := range nics {
		links[q].Flush()
		if b, ok := nic.Take(); !ok || string(b) != fmt.Sprintf("from %d", q+2) {
			t.Errorf("queue %d sent %q, want shard %d's frame", q, b, q+2)
		}
	}
}
