package afxdp

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

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
	unix.Close(g.fd)
	return g.sent
}

// benchRig is a 1-queue lab with the program attached and one socket.
func benchRig(b *testing.B) (*lab.Lab, *Socket) {
	needRoot(b)
	l, err := lab.New(lab.Config{Prefix: "pb"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	var p *Program
	var s *Socket
	err = l.ServerNS.Do(func() (err error) {
		if p, err = NewProgram(ProgramConfig{IP: l.ServerIP, Ports: []uint16{listenPort}}); err != nil {
			return err
		}
		if err = p.Attach(l.ServerIf, Native); err != nil {
			return err
		}
		if s, err = Open(Config{Interface: l.ServerIf, Logf: func(string, ...any) {}}); err != nil {
			return err
		}
		return p.Register(s)
	})
	b.Cleanup(func() {
		if s != nil {
			s.Close()
		}
		if p != nil {
			p.Close()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return l, s
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
	g := startGenerator(b, l, benchFrame(b, l))
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
	g := startGenerator(b, l, benchFrame(b, l))
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	if sent > 0 {
		// Frames the generator sent that the kernel dropped before our rx
		// ring (fill ring empty or rx ring full while we were descheduled).
		b.ReportMetric(float64(st.RxDropped+st.RxRingFull)/float64(sent), "dropped/sent")
	}
}
