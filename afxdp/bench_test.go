package afxdp

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"percore/lab"
)

// generator floods one frame from the client namespace through an AF_PACKET
// socket, 64 frames per sendmmsg, until stopped. It stands in for a NIC
// peer; its CPU also runs the veth NAPI and the XDP program.
type generator struct {
	fd   int
	msgs []unix.Mmsghdr
	iov  unix.Iovec
	sa   unix.RawSockaddrLinklayer
	stop chan struct{}
	done sync.WaitGroup
	sent uint64
}

func startGenerator(b *testing.B, l *lab.Lab, frame []byte) *generator {
	g := &generator{stop: make(chan struct{})}
	var ifindex int
	if err := l.ClientNS.Do(func() (err error) {
		g.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		ifi, err := netInterface(l.ClientIf)
		if err != nil {
			return err
		}
		ifindex = ifi
		return unix.SetsockoptInt(g.fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	}); err != nil {
		b.Fatal(err)
	}
	g.sa = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Ifindex: int32(ifindex), Halen: 6}
	g.iov = unix.Iovec{Base: &frame[0], Len: uint64(len(frame))}
	g.msgs = make([]unix.Mmsghdr, 64)
	for i := range g.msgs {
		g.msgs[i].Hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&g.sa)), Namelen: unix.SizeofSockaddrLinklayer, Iov: &g.iov, Iovlen: 1}
	}
	g.done.Add(1)
	go func() {
		defer g.done.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		limit := time.Now().Add(2 * time.Minute) // safety bound
		for i := 0; ; i++ {
			if i&63 == 0 {
				select {
				case <-g.stop:
					return
				default:
				}
				if time.Now().After(limit) {
					return
				}
			}
			n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(g.fd), uintptr(unsafe.Pointer(&g.msgs[0])), uintptr(len(g.msgs)), 0, 0, 0)
			if e == 0 {
				g.sent += uint64(n)
			}
		}
	}()
	return g
}

func (g *generator) halt() uint64 {
	close(g.stop)
	g.done.Wait()
	if g.fd >= 0 {
		unix.Close(g.fd)
	}
	return g.sent
}

// startXDPGenerator floods frame into the server end at kernel speed: a
// one-instruction XDP_TX program run in live-frame mode (BPF_PROG_RUN with
// BPF_F_TEST_XDP_LIVE_FRAMES) on the client end turns each run into a real
// frame transmitted over the veth, like xdp-trafficgen. It returns nil when
// the kernel does not support live frames (then use startGenerator).
func startXDPGenerator(b *testing.B, l *lab.Lab, frame []byte) *generator {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpTX), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	ifindex := 0
	if err := l.ClientNS.Do(func() (err error) { ifindex, err = netInterface(l.ClientIf); return err }); err != nil {
		b.Fatal(err)
	}
	g := &generator{fd: -1, stop: make(chan struct{})}
	const burst = 1 << 14
	opts := &ebpf.RunOptions{
		Data:    frame,
		Repeat:  burst,
		Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)},
	}
	first := make(chan error, 1)
	g.done.Add(1)
	go func() {
		defer g.done.Done()
		defer prog.Close()
		runtime.LockOSThread() // never unlocked: this thread enters the client namespace
		if err := l.ClientNS.Enter(); err != nil {
			first <- err
			return
		}
		limit := time.Now().Add(2 * time.Minute) // safety bound
		for i := 0; ; i++ {
			_, err := prog.Run(opts)
			if i == 0 {
				first <- err
			}
			if err != nil {
				return
			}
			g.sent += burst
			select {
			case <-g.stop:
				return
			default:
			}
			if time.Now().After(limit) {
				return
			}
		}
	}()
	if err := <-first; err != nil {
		b.Logf("no XDP live-frame generator (%v): using AF_PACKET", err)
		g.done.Wait()
		return nil
	}
	return g
}

// xdpMD is struct xdp_md, the XDP context for BPF_PROG_RUN.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// benchRig is a 1-queue lab with the program attached and one socket.
func benchRig(b *testing.B) (*lab.Lab, *Socket) {
	l := newLab(b, lab.Config{Prefix: "pb"})
	_, socks := attachLab(b, l, ProgramConfig{IP: l.ServerIP, Ports: []uint16{listenPort}},
		Config{FrameSize: 2048, FrameCount: 16384, Logf: func(string, ...any) {}}, 1)
	return l, socks[0]
}

// flood starts the fastest generator the kernel supports.
func flood(b *testing.B, l *lab.Lab) *generator {
	if g := startXDPGenerator(b, l, benchFrame(b, l)); g != nil {
		return g
	}
	return startGenerator(b, l, benchFrame(b, l))
}

func benchFrame(b *testing.B, l *lab.Lab) []byte {
	f := tcpSYN(b, l.ClientIP, l.ServerIP, 40000, listenPort)
	copy(f[0:6], l.ServerMAC)
	copy(f[6:12], l.ClientMAC)
	return f
}

// BenchmarkRxOnly: frames received from one queue and given straight back to
// the fill ring. ns/op is per frame.
func BenchmarkRxOnly(b *testing.B) {
	l, s := benchRig(b)
	g := flood(b, l)
	rx := make([]Desc, 64)
	deadline := time.Now().Add(time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	got := 0
	for i := 0; got < b.N; i++ {
		n := s.Receive(rx)
		s.Release(rx[:n])
		got += n
		if i&1023 == 0 && time.Now().After(deadline) {
			b.Fatalf("received %d of %d frames in a minute", got, b.N)
		}
	}
	b.StopTimer()
	sent := g.halt()
	report(b, s, sent)
}

// BenchmarkReflect: each received frame is copied into a tx frame with the
// MAC addresses swapped and sent back out of the same queue (rx + tx + kick
// + completion). ns/op is per reflected frame.
func BenchmarkReflect(b *testing.B) {
	l, s := benchRig(b)
	g := flood(b, l)
	rx := make([]Desc, 64)
	tx := make([]Desc, 64)
	deadline := time.Now().Add(time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	sentBack := 0
	for i := 0; sentBack < b.N; i++ {
		s.Complete()
		n := s.Receive(rx)
		m := s.AllocTx(tx[:n])
		for j := 0; j < m; j++ {
			in := s.Frame(rx[j].Addr, int(rx[j].Len))
			out := s.Frame(tx[j].Addr, len(in))
			copy(out[0:6], in[6:12])
			copy(out[6:12], in[0:6])
			copy(out[12:], in[12:])
			tx[j].Len = uint32(len(in))
		}
		s.FreeTx(rx[m:n]) // no tx frame for these: drop them back to the fill ring below
		sentBack += s.Transmit(tx[:m])
		s.Kick()
		s.Release(rx[:m])
		s.Fill(n - m)
		if i&1023 == 0 && time.Now().After(deadline) {
			b.Fatalf("reflected %d of %d frames in a minute", sentBack, b.N)
		}
	}
	b.StopTimer()
	sent := g.halt()
	report(b, s, sent)
}

func report(b *testing.B, s *Socket, sent uint64) {
	st, err := s.Stats()
	if err != nil {
		b.Fatal(err)
	}
	if st.RxBadDesc+st.TxBadDesc+st.KickErrors+st.FreeBad != 0 {
		b.Errorf("errors in stats: %+v", st)
	}
	if testing.Verbose() {
		b.Logf("sent %d, stats %+v", sent, st)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	if sent > 0 {
		// Frames the generator sent that the kernel dropped before our rx
		// ring (fill ring empty or rx ring full while we were descheduled).
		b.ReportMetric(float64(st.RxDropped+st.RxRingFull)/float64(sent), "dropped/sent")
	}
}

// BenchmarkSteer is the XDP program's own cost per frame, run by the kernel
// through BPF_PROG_TEST_RUN with no socket bound: a TCP SYN to a steered port
// (the longest path: two map lookups) and an IPv6 frame (the shortest).
func BenchmarkSteer(b *testing.B) {
	needRoot(b)
	p, err := NewProgram(ProgramConfig{IP: ourIP, Ports: []uint16{listenPort}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"tcp", tcpSYN(b, peerIP, ourIP, 1, listenPort)},
		{"udp-pass", udp(b, peerIP, ourIP, 53)},
	} {
		b.Run(c.name, func(b *testing.B) {
			_, d, err := p.prog.Benchmark(c.frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "ns/op")
		})
	}
}
