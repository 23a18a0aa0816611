package netstack

import (
	"testing"
	"time"
)

func TestChanLinkQueues(t *testing.T) {
	l := NewChanLink(100, 2)
	if !l.Inject([]byte("one")) || !l.Inject([]byte("two")) || l.Inject([]byte("three")) {
		t.Fatal("inject: want two accepted, the third refused")
	}
	if l.Inject(make([]byte, 115)) || l.Stats.InjectDrops != 2 {
		t.Fatalf("oversized frame accepted; drops %d", l.Stats.InjectDrops)
	}
	fs := make([]Frame, 4)
	if n := l.RxBatch(fs, nil); n != 2 || string(fs[0].Buf) != "one" || string(fs[1].Buf) != "two" {
		t.Fatalf("rx batch %d: %q %q", n, fs[0].Buf, fs[1].Buf)
	}
	if l.Inject([]byte("x")) {
		t.Fatal("inject while every rx frame is lent")
	}
	l.RxDone(fs[:2])

	if n := l.TxAlloc(fs[:3]); n != 2 || len(fs[0].Buf) != 114 || l.Stats.TxAllocShort != 1 {
		t.Fatalf("tx alloc %d, %d bytes", n, len(fs[0].Buf))
	}
	copy(fs[0].Buf, "hello")
	fs[0].Buf = fs[0].Buf[:5]
	l.TxSubmit(fs[:1])
	l.TxFree(fs[1:2])
	if _, ok := l.Take(); ok {
		t.Fatal("frame visible before Flush")
	}
	l.Flush()
	if b, ok := l.Take(); !ok || string(b) != "hello" {
		t.Fatalf("take %q %v", b, ok)
	}
	if rx, tx := l.Lent(); rx != 0 || tx != 0 {
		t.Fatalf("lent rx %d tx %d", rx, tx)
	}
}

func TestChanLinkContractPanics(t *testing.T) {
	for name, f := range map[string]func(l *ChanLink, fs []Frame){
		"double RxDone":   func(l *ChanLink, fs []Frame) { l.RxBatch(fs, nil); l.RxDone(fs[:1]); l.RxDone(fs[:1]) },
		"TxFree twice":    func(l *ChanLink, fs []Frame) { l.TxAlloc(fs[:1]); l.TxFree(fs[:1]); l.TxFree(fs[:1]) },
		"submit rx frame": func(l *ChanLink, fs []Frame) { l.RxBatch(fs, nil); l.TxSubmit(fs[:1]) },
		"foreign frame":   func(l *ChanLink, fs []Frame) { l.TxSubmit([]Frame{{ID: 99}}) },
		"submit too long": func(l *ChanLink, fs []Frame) {
			l.TxAlloc(fs[:1])
			fs[0].Buf = make([]byte, 115) // MTU 100 + 14, plus one
			l.TxSubmit(fs[:1])
		},
		"RxDone tx frame": func(l *ChanLink, fs []Frame) { l.TxAlloc(fs[:1]); l.RxDone(fs[:1]) },
		"submit twice":    func(l *ChanLink, fs []Frame) { l.TxAlloc(fs[:1]); l.TxSubmit(fs[:1]); l.TxSubmit(fs[:1]) },
	} {
		l := NewChanLink(100, 2)
		l.Inject([]byte("frame"))
		fs := make([]Frame, 1)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(l, fs)
		}()
	}
}

// TestTwoStacksResolve joins two stacks with ForwardTo through lossy
// FaultLinks: a packet from A to B waits for ARP, the request is retried
// until one gets through, and the packet arrives.
func TestTwoStacksResolve(t *testing.T) {
	retried := false
	for seed := uint64(1); seed <= 5; seed++ {
		cfgB := testConfig()
		cfgB.MAC, cfgB.Addr = macB, ipB
		a, b := newTestCtx(t, nil), newTestCtx(t, nil)
		sb, err := NewStack(cfgB)
		if err != nil {
			t.Fatal(err)
		}
		b.s = sb
		fa := NewFaultLink(a.link, Faults{}, Faults{Loss: 0.4}, seed)
		fb := NewFaultLink(b.link, Faults{}, Faults{Loss: 0.4}, seed+100)
		a.during(func() {
			f, p, _ := a.s.allocIPv4()
			copy(p, "payload")
			a.s.sendIPv4(f, ipB, 253, 7)
		})
		for range 10 {
			a.link.ForwardTo(b.link)
			b.s.Poll(b.now, fb)
			b.link.ForwardTo(a.link)
			a.s.Poll(a.now, fa)
			a.now, b.now = a.now.Add(time.Second), b.now.Add(time.Second)
		}
		a.link.ForwardTo(b.link)
		b.s.Poll(b.now, fb)
		sa, sbs := a.s.Stats(), b.s.Stats()
		resolved := sa.ARPRepliesRx > 0
		delivered := sbs.IPv4UnknownProto == 1 // protocol 253 reached B
		switch {
		case a.s.Pending() != 0:
			t.Fatalf("seed %d: still pending after every retry: %+v", seed, sa)
		case resolved && sa.TxFrames != sa.ARPRequestsTx+1:
			t.Fatalf("seed %d: resolved but the packet was not sent: %+v", seed, sa)
		case !resolved && (sa.ARPResolveFailed != 1 || sa.PendingDropFail != 1):
			t.Fatalf("seed %d: neither resolved nor failed: %+v", seed, sa)
		case sbs.RxFrames != sa.TxFrames-fa.Stats.TxLost || sa.RxFrames != sbs.TxFrames-fb.Stats.TxLost:
			t.Fatalf("seed %d: frames not lost by a link went missing: A %+v B %+v", seed, sa, sbs)
		case delivered && !resolved:
			t.Fatalf("seed %d: delivered without resolution", seed)
		}
		retried = retried || sa.ARPRequestsTx > 1
		t.Logf("seed %d: resolved %v delivered %v after %d ARP requests (A's link lost %d, B's %d)",
			seed, resolved, delivered, sa.ARPRequestsTx, fa.Stats.TxLost, fb.Stats.TxLost)
	}
	if !retried {
		t.Fatal("no seed needed an ARP retry: the test lost its point")
	}
}
