package netstack

import (
	"reflect"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time. Benchmarks report
// cpu-ns/op from it beside ns/op: on the shared 2-vCPU lab machine wall time
// per op includes time the benchmark spent preempted.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU time per op and ops per CPU-second since start.
func reportCPU(b *testing.B, start time.Duration, unit string) {
	cpu := cpuTime() - start
	if cpu <= 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), unit+"/cpu-s")
}

// TestStackNoAllocs proves the per-packet paths allocate nothing: ARP reply,
// ICMP echo reply, gleaning, drops, and resolution with the pending queue.
func TestStackNoAllocs(t *testing.T) {
	c := newTestCtx(t, nil)
	arpReq := arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA)
	ping := pingFromB(t, 1, "0123456789abcdef0123456789abcdef")
	bad := append([]byte(nil), ping...)
	bad[24] ^= 1
	far := echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, nil)
	gwReply := arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macA, ipA)

	for name, frames := range map[string][][]byte{
		"arp reply":  {arpReq},
		"echo reply": {ping},
		"batch":      {ping, arpReq, ping, bad, ping},
		"drop":       {bad},
	} {
		c.link.Discard()
		n := testing.AllocsPerRun(500, func() {
			for _, f := range frames {
				c.link.Inject(f)
			}
			c.poll()
			c.link.Discard()
		})
		if n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
	// Resolution: the gateway entry is dropped each run, so every run sends
	// an ARP request, parks the reply and releases it on the ARP reply.
	n := testing.AllocsPerRun(200, func() {
		if e := c.s.arp.find(ipGW); e != nil {
			*e = arpEntry{}
		}
		c.link.Inject(far)
		c.poll()
		c.link.Inject(gwReply)
		c.now = c.now.Add(time.Millisecond)
		c.poll()
		c.link.Discard()
	})
	if n != 0 {
		t.Errorf("resolution: %v allocs per run", n)
	}
	if st := c.stats(); st.ARPRepliesRx < 200 || st.PendingDropFail != 0 {
		t.Fatalf("resolution path not taken: %+v", st)
	}
}

// TestStatsAddCoversAllFields fails when a counter is added to Stats but not
// to Add.
func TestStatsAddCoversAllFields(t *testing.T) {
	var a, b Stats
	v := reflect.ValueOf(&b).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	a.Add(&b)
	a.Add(&b)
	va := reflect.ValueOf(a)
	for i := range va.NumField() {
		if got := va.Field(i).Uint(); got != uint64(2*(i+1)) {
			t.Errorf("Add misses %s", va.Type().Field(i).Name)
		}
	}
}

// benchStack runs frames through a stack, perPoll frames per Poll, and
// reports packets per second. The injection copy (the link's part) is
// included in the time. stamped gives each frame a receive time, as
// AF_XDP's carry; answered says the stack answers each frame (else it
// drops them all).
func benchStack(b *testing.B, frame []byte, perPoll int, stamped, answered bool) {
	c := newTestCtx(b, nil)
	c.link = NewChanLink(1500, 512)
	// Learn B so echo replies need no resolution.
	c.send(arpFrame(b, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA))
	c.link.Discard()
	b.ReportAllocs()
	n := 0
	start := cpuTime()
	for b.Loop() {
		if stamped {
			c.link.InjectAt(frame, c.now)
		} else {
			c.link.Inject(frame)
		}
		if n++; n == perPoll {
			c.s.Poll(c.now, c.link)
			if sent := c.link.Discard(); answered && sent != perPoll || !answered && sent != 0 {
				b.Fatalf("%d frames sent for %d received", sent, perPoll)
			}
			n = 0
		}
	}
	reportCPU(b, start, "pkts")
}

func BenchmarkStackEchoReply(b *testing.B) {
	ping := pingFromB(b, 1, string(make([]byte, 56))) // the size ping(8) sends
	b.Run("batch1", func(b *testing.B) { benchStack(b, ping, 1, false, true) })
	b.Run("batch32", func(b *testing.B) { benchStack(b, ping, 32, false, true) })
	b.Run("batch32stamped", func(b *testing.B) { benchStack(b, ping, 32, true, true) })
}

func BenchmarkStackARPReply(b *testing.B) {
	req := arpFrame(b, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA)
	b.Run("batch1", func(b *testing.B) { benchStack(b, req, 1, false, true) })
	b.Run("batch32", func(b *testing.B) { benchStack(b, req, 32, false, true) })
}

// BenchmarkStackRxTime is what receive times cost the stack: frames on
// the cheapest path (a counted drop, bad IPv4 checksum), 32 a Poll,
// without and with a receive time each (the link's share, InjectAt,
// included).
func BenchmarkStackRxTime(b *testing.B) {
	bad := badPing(b)
	b.Run("none", func(b *testing.B) { benchStack(b, bad, 32, false, false) })
	b.Run("stamped", func(b *testing.B) { benchStack(b, bad, 32, true, false) })
}

// BenchmarkStackDrop is the cost of rejecting a frame (bad IPv4 checksum).
func BenchmarkStackDrop(b *testing.B) { benchStack(b, badPing(b), 32, false, false) }

// badPing is an echo request whose IPv4 header checksum is wrong.
func badPing(b *testing.B) []byte {
	bad := pingFromB(b, 1, string(make([]byte, 56)))
	bad[24] ^= 1
	return bad
}
