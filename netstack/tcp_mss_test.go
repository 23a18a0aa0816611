package netstack

import (
	"net/netip"
	"testing"
	"time"
)

// bulkApp sends size bytes once and takes everything it is fed.
type bulkApp struct {
	out [][]byte
	got int
}

func (a *bulkApp) Feed(p []byte, now time.Time) int { a.got += len(p); return len(p) }
func (a *bulkApp) Output() [][]byte                 { return a.out }
func (a *bulkApp) Advance(n int) {
	for n > 0 && len(a.out) > 0 {
		k := min(n, len(a.out[0]))
		a.out[0] = a.out[0][k:]
		n -= k
		if len(a.out[0]) == 0 {
			a.out = a.out[1:]
		}
	}
}
func (a *bulkApp) Closing() bool            { return false }
func (a *bulkApp) PeerClosed(now time.Time) {}

type bulkEP struct {
	size int
	app  *bulkApp
}

func (e *bulkEP) Accept(netip.AddrPort, TCPHandle, time.Time) TCPApp {
	e.app = &bulkApp{out: [][]byte{make([]byte, e.size)}}
	return e.app
}
func (e *bulkEP) Release(TCPApp, time.Time) {}

// With the MSS NewNative picks (MTU-40), full-sized data segments that also
// carry timestamps and SACK blocks still fit a 1500-byte MTU: both ends send
// 256 KiB at once over ChanLinks, one client frame is lost so the server holds
// out-of-order data (its segments want SACK blocks), and no frame either way
// exceeds 14+1500 bytes, while full-sized frames and SACK-bearing segments
// of the server both occur (on a full-sized data segment the SACK blocks
// yield to data).
func TestNativeMSSFitsMTU(t *testing.T) {
	const mtu, size = 1500, 256 << 10
	a, err := NewStack(Config{MAC: macA, Addr: ipA, Netmask: mask})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewStack(Config{MAC: macB, Addr: ipB, Netmask: mask})
	if err != nil {
		t.Fatal(err)
	}
	a.EnableTCP(TCPConfig{MaxConns: 16, Seed: 1, MSS: mtu - 40})
	b.EnableTCP(TCPConfig{MaxConns: 16, Seed: 2, MSS: mtu - 40})
	la, lb := NewChanLink(mtu, 512), NewChanLink(mtu, 512)
	ep := &bulkEP{size: size}
	if err := a.ListenTCP(80, ep); err != nil {
		t.Fatal(err)
	}
	cl := &bulkApp{out: [][]byte{make([]byte, size)}}
	now := time.Unix(1_000_000, 0)
	if _, err := b.ConnectTCP(now, ipA, 80, cl, &bulkEP{}); err != nil {
		t.Fatal(err)
	}
	var maxLen, full, sackSegs, clientData int
	move := func(from, to *ChanLink, client bool) {
		for {
			f, ok := from.Take()
			if !ok {
				return
			}
			if len(f) > maxLen {
				maxLen = len(f)
			}
			if len(f) == 14+mtu {
				full++
			}
			e := Ethernet(f)
			if ip := IPv4(e.Payload()); e.Type() == EtherTypeIPv4 && ip.Valid() && ip.Protocol() == ProtoTCP {
				var tf TCPFields
				tcp := TCP(ip.Payload())
				if tcp.Valid() && tf.Decode(tcp) && !client && tf.NSACK > 0 {
					sackSegs++
				}
				if tcp.Valid() && tf.Decode(tcp) && len(tcp.Payload()) > 0 {
					if client {
						clientData++
						if clientData == 5 {
							continue // lost: the server now holds data out of order
						}
					}
				}
			}
			to.Inject(f)
		}
	}
	for i := 0; i < 20000 && (cl.got < size || ep.app == nil || ep.app.got < size); i++ {
		now = now.Add(100 * time.Microsecond)
		b.Poll(now, lb)
		move(lb, la, true)
		a.Poll(now, la)
		move(la, lb, false)
	}
	if ep.app == nil || cl.got != size || ep.app.got != size {
		t.Fatalf("transfer incomplete: client got %d, server %v; A %+v", cl.got, ep.app, a.TCPStats())
	}
	if maxLen > 14+mtu {
		t.Fatalf("a %d-byte frame on a %d-byte MTU", maxLen, mtu)
	}
	if full == 0 || sackSegs == 0 {
		t.Fatalf("%d full-sized frames, %d server segments with SACK blocks: the test did not exercise the limit", full, sackSegs)
	}
}
