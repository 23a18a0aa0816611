package netstack

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// Two stacks joined by ChanLinks, each side's tx impaired by a FaultLink:
// a client on B fetches bodies from a server on A, over fresh and reused
// connections, and every byte must arrive exact.

// sizeServer answers each 8-byte request (a big-endian size, high bit set
// for "close after") with that many bytes of pattern.
type sizeServer struct {
	req     []byte
	out     [][]byte
	closing bool
	body    []byte
}

func (s *sizeServer) Feed(p []byte, now time.Time) int {
	s.req = append(s.req, p...)
	for len(s.req) >= 8 {
		n := binary.BigEndian.Uint64(s.req)
		s.req = s.req[8:]
		s.out = append(s.out, s.body[:n&^(1<<63)])
		if n>>63 != 0 {
			s.closing = true
		}
	}
	return len(p)
}
func (s *sizeServer) Output() [][]byte { return s.out }
func (s *sizeServer) Advance(n int) {
	s.out = consume(s.out, n)
}
func (s *sizeServer) Closing() bool            { return s.closing && len(s.out) == 0 }
func (s *sizeServer) PeerClosed(now time.Time) { s.closing = true }

type sizeServerEP struct {
	body              []byte
	accepted, release int
}

func (e *sizeServerEP) Accept(remote netip.AddrPort, _ TCPHandle, now time.Time) TCPApp {
	e.accepted++
	return &sizeServer{body: e.body}
}
func (e *sizeServerEP) Release(app TCPApp, now time.Time) { e.release++ }

// sizeClient asks for each of sizes in turn and hashes what comes back.
type sizeClient struct {
	sizes   []int
	next    int
	want    int
	got     int
	acc     []byte
	out     [][]byte
	reqBuf  [8]byte
	done    bool
	peerFin bool
	sums    [][32]byte
}

func (c *sizeClient) request() {
	n := uint64(c.sizes[c.next])
	if c.next == len(c.sizes)-1 {
		n |= 1 << 63
	}
	binary.BigEndian.PutUint64(c.reqBuf[:], n)
	c.out = append(c.out, c.reqBuf[:])
	c.want, c.got = c.sizes[c.next], 0
	c.acc = c.acc[:0]
}

func (c *sizeClient) Feed(p []byte, now time.Time) int {
	c.acc = append(c.acc, p...)
	c.got += len(p)
	if c.got >= c.want && !c.done {
		c.sums = append(c.sums, sha256.Sum256(c.acc[:c.want]))
		c.next++
		if c.next == len(c.sizes) {
			c.done = true
		} else {
			c.request()
		}
	}
	return len(p)
}
func (c *sizeClient) Output() [][]byte { return c.out }
func (c *sizeClient) Advance(n int) {
	c.out = consume(c.out, n)
}
func (c *sizeClient) Closing() bool            { return c.done }
func (c *sizeClient) PeerClosed(now time.Time) { c.peerFin = true }

type releaseCounter struct{ n int }

func (r *releaseCounter) Accept(netip.AddrPort, TCPHandle, time.Time) TCPApp { return nil }
func (r *releaseCounter) Release(TCPApp, time.Time)                          { r.n++ }

type e2eNet struct {
	t      *testing.T
	a, b   *Stack
	la, lb *ChanLink
	fa, fb *FaultLink
	now    time.Time
}

func newE2E(t *testing.T, faults Faults, seed uint64, tcfg TCPConfig) *e2eNet {
	n := &e2eNet{t: t, now: time.Unix(1_000_000, 0)}
	var err error
	n.a, err = NewStack(Config{MAC: macA, Addr: ipA, Netmask: mask})
	if err != nil {
		t.Fatal(err)
	}
	n.b, err = NewStack(Config{MAC: macB, Addr: ipB, Netmask: mask})
	if err != nil {
		t.Fatal(err)
	}
	tcfg.Seed = seed
	n.a.EnableTCP(tcfg)
	tcfg.Seed = seed + 1
	n.b.EnableTCP(tcfg)
	n.la, n.lb = NewChanLink(1500, 1024), NewChanLink(1500, 1024)
	n.fa = NewFaultLink(n.la, Faults{}, faults, seed)
	n.fb = NewFaultLink(n.lb, Faults{}, faults, seed+7)
	return n
}

// run polls both stacks until done() or the step bound; the clock moves
// 1 ms per busy step and jumps to the next deadline when the net is idle.
func (n *e2eNet) run(done func() bool, steps int) {
	n.t.Helper()
	for i := 0; i < steps; i++ {
		da := n.a.Poll(n.now, n.fa)
		db := n.b.Poll(n.now, n.fb)
		moved := n.la.ForwardTo(n.lb) + n.lb.ForwardTo(n.la)
		if done() {
			return
		}
		_, ha := n.fa.Held()
		_, hb := n.fb.Held()
		if moved > 0 || ha+hb > 0 {
			n.now = n.now.Add(time.Millisecond)
			continue
		}
		next := da
		if next.IsZero() || (!db.IsZero() && db.Before(next)) {
			next = db
		}
		if next.IsZero() {
			n.t.Fatalf("idle with no timer and not done after %d steps\nA %+v\nB %+v\nA tcp %+v\nB tcp %+v", i, n.a.Stats(), n.b.Stats(), n.a.TCPStats(), n.b.TCPStats())
		}
		if next.After(n.now) {
			n.now = next
		} else {
			n.now = n.now.Add(time.Millisecond)
		}
	}
	n.t.Fatalf("not done after %d steps; A tcp %+v\nB tcp %+v", steps, n.a.TCPStats(), n.b.TCPStats())
}

func TestTCPEndToEnd(t *testing.T) {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i*7 + i>>8)
	}
	sizes := []int{1, 1024, 1 << 20, 1000, 1 << 20}
	cases := []struct {
		name   string
		faults Faults
		seeds  int
	}{
		{"clean", Faults{}, 1},
		{"impaired", Faults{Loss: 0.05, Reorder: 0.10, Dup: 0.01, Corrupt: 0.001}, 3},
	}
	for _, tc := range cases {
		for seed := uint64(1); seed <= uint64(tc.seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				n := newE2E(t, tc.faults, seed, TCPConfig{RcvBuf: 256 << 10, MaxConns: 64})
				sep := &sizeServerEP{body: body}
				if err := n.a.ListenTCP(80, sep); err != nil {
					t.Fatal(err)
				}
				// Two connections one after the other, then two at once.
				rel := &releaseCounter{}
				var clients []*sizeClient
				for round := 0; round < 3; round++ {
					k := 1
					if round == 2 {
						k = 2
					}
					var cs []*sizeClient
					for j := 0; j < k; j++ {
						c := &sizeClient{sizes: sizes}
						c.request()
						if _, err := n.b.ConnectTCP(n.now, ipA, 80, c, rel); err != nil {
							t.Fatal(err)
						}
						cs = append(cs, c)
					}
					clients = append(clients, cs...)
					n.run(func() bool {
						for _, c := range cs {
							if !c.done || !c.peerFin {
								return false
							}
						}
						return true
					}, 400000)
				}
				for _, c := range clients {
					for i, s := range sizes {
						if c.sums[i] != sha256.Sum256(body[:s]) {
							t.Fatalf("body %d (%d bytes) corrupt", i, s)
						}
					}
				}
				// Let TIME-WAIT and LAST-ACK finish: all connections gone.
				n.run(func() bool {
					return n.a.TCPStats().Conns == 0 && n.b.TCPStats().Conns == 0
				}, 100000)
				sa, sb := n.a.TCPStats(), n.b.TCPStats()
				// Buffers and RACK rings were lent and all came back.
				if n.a.tcp.txMade == 0 || sa.TxRingsUsed+sb.TxRingsUsed+sa.RcvBufsUsed+sb.RcvBufsUsed != 0 {
					t.Fatalf("rings made %d, used %d/%d; buffers used %d/%d", n.a.tcp.txMade, sa.TxRingsUsed, sb.TxRingsUsed, sa.RcvBufsUsed, sb.RcvBufsUsed)
				}
				if sep.accepted != 4 || sep.release != 4 || rel.n != 4 {
					t.Fatalf("accepted %d released %d/%d", sep.accepted, sep.release, rel.n)
				}
				// The server sends the data; the client's few request
				// segments may all get through.
				if tc.faults.Loss > 0 && sa.Retransmits == 0 {
					t.Fatalf("no retransmissions under loss: A %+v B %+v", sa, sb)
				}
				if tc.faults.Corrupt > 0 && n.a.Stats().IPv4BadChecksum+sa.ChecksumDrop+n.b.Stats().IPv4BadChecksum+sb.ChecksumDrop == 0 && n.fa.Stats.TxCorrupted+n.fb.Stats.TxCorrupted > 0 {
					t.Logf("corruptions %d/%d not caught by a checksum (hit a header field?)", n.fa.Stats.TxCorrupted, n.fb.Stats.TxCorrupted)
				}
				t.Logf("server: retrans %d fast %d rto %d tlp %d | client: ooo %d (not held %d) dup %d csum drops %d retrans %d | faults A %+v B %+v",
					sa.Retransmits, sa.FastRetransmits, sa.RTOTimeouts, sa.TailLossProbes, sb.OOOSegs, sb.OOODrop, sb.DupSegs, sb.ChecksumDrop,
					sb.Retransmits, n.fa.Stats, n.fb.Stats)
			})
		}
	}
}
