package afxdp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"percore/lab"
)

// labRig is a lab with the program attached to the server end and one socket
// and responder per queue.
type labRig struct {
	l     *lab.Lab
	prog  *Program
	socks []*Socket
	resp  []*responder
	stop  chan struct{}
	wg    sync.WaitGroup
}

const listenPort = 8080

func newLabRig(t *testing.T, queues int) *labRig {
	t.Helper()
	needRoot(t)
	l, err := lab.New(lab.Config{Prefix: "px", Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	r := &labRig{l: l, stop: make(chan struct{})}
	r.prog, r.socks = attachLab(t, l, ProgramConfig{IP: l.ServerIP, Ports: []uint16{listenPort}}, Config{FrameCount: 256, Logf: t.Logf}, queues)
	t.Cleanup(r.halt) // before attachLab's cleanup closes the sockets
	for _, s := range r.socks {
		rs := newResponder(s, l.ServerIP, l.ServerMAC)
		r.resp = append(r.resp, rs)
		r.wg.Add(1)
		go func() { defer r.wg.Done(); rs.run(r.stop) }()
	}
	return r
}

// halt stops the responders; idempotent.
func (r *labRig) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

// ping sends one echo request with id from src (a client address) on a raw
// socket in the client namespace and reports whether the matching reply came
// back within three seconds (a bound for loaded machines, not a timing check).
func ping(t *testing.T, l *lab.Lab, src, dst netip.Addr, id uint16) bool {
	t.Helper()
	var fd int
	if err := l.ClientNS.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	req := make([]byte, 16)
	req[0] = 8
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], 1)
	copy(req[8:], "percore!")
	binary.BigEndian.PutUint16(req[2:], checksum(req))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
		t.Fatalf("ping %s: %v", dst, err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 3})
	buf := make([]byte, 1500)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false
		}
		// Raw IPv4 sockets deliver the IP header.
		ihl := int(buf[0]&0xf) * 4
		if n >= ihl+8 && [4]byte(buf[12:16]) == dst.As4() && buf[ihl] == 0 && binary.BigEndian.Uint16(buf[ihl+4:]) == id {
			return true
		}
	}
	return false
}

func TestLabARPAndEchoOnEveryQueue(t *testing.T) {
	r := newLabRig(t, 2)
	l := r.l
	// The client kernel hashes an ICMP flow by its addresses to pick a tx
	// queue of its veth end, which is our rx queue. Ping from more client
	// addresses until every queue has answered (bounded).
	sent, answered := 0, 0
	for id := uint16(1); id <= 32; id++ {
		src := l.ClientIP
		if id > 1 {
			src = lab.Host(l.Subnet, byte(100+id))
			if err := lab.AddAddr(l.ClientNS, l.ClientIf, netip.PrefixFrom(src, 32)); err != nil {
				t.Fatal(err)
			}
		}
		sent++
		if ping(t, l, src, l.ServerIP, id) {
			answered++
		}
		if sent >= 4 && r.resp[0].icmp.Load() > 0 && r.resp[1].icmp.Load() > 0 {
			break
		}
	}
	if answered != sent {
		t.Errorf("%d of %d pings answered", answered, sent)
	}
	for q, rs := range r.resp {
		if rs.icmp.Load() == 0 {
			t.Errorf("queue %d answered no echo request", q)
		}
		t.Logf("queue %d: %d arp, %d echo answered", q, rs.arp.Load(), rs.icmp.Load())
	}
	if r.resp[0].arp.Load()+r.resp[1].arp.Load() == 0 {
		t.Error("no ARP request answered")
	}

	// The client kernel learnt our MAC from the userspace ARP reply.
	h, err := l.ClientNS.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(l.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	neighs, err := h.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range neighs {
		if n.IP.Equal(l.ServerIP.AsSlice()) {
			found = true
			if n.State&netlink.NUD_REACHABLE == 0 || n.HardwareAddr.String() != l.ServerMAC.String() {
				t.Errorf("client neighbour %s: state %s mac %s, want REACHABLE %s", n.IP, neighState(n.State), n.HardwareAddr, l.ServerMAC)
			}
		}
	}
	if !found {
		t.Errorf("client has no neighbour entry for %s: %v", l.ServerIP, neighs)
	}
	r.halt()
	for q, s := range r.socks {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.RxBadDesc+st.TxBadDesc+st.KickErrors+st.FreeBad != 0 || st.RxFrames == 0 || st.TxFrames == 0 {
			t.Errorf("queue %d stats %+v", q, st)
		}
	}
}

func neighState(s int) string {
	if s&netlink.NUD_REACHABLE != 0 {
		return "REACHABLE"
	}
	return fmt.Sprintf("0x%x", s)
}

// connectAll opens n non-blocking TCP connections from the client namespace
// to dst:port (each sends a SYN at once) and returns their fds.
func connectAll(t *testing.T, l *lab.Lab, dst netip.Addr, port, n int) []int {
	t.Helper()
	var fds []int
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	if err := l.ClientNS.Do(func() error {
		for i := 0; i < n; i++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			err = unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.As4(), Port: port})
			if err != unix.EINPROGRESS {
				return fmt.Errorf("connect: %v", err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return fds
}

// waitFor polls cond every 10 ms for at most d; it bounds the test, it is
// not a timing assertion.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestLabFlowsSpreadAcrossQueues(t *testing.T) {
	r := newLabRig(t, 2)
	l := r.l
	const flows = 32
	// SYNs to a port the program does not steer must never reach us.
	connectAll(t, l, l.ServerIP, listenPort+1, 4)
	connectAll(t, l, l.ServerIP, listenPort, flows)
	if !waitFor(5*time.Second, func() bool { return r.resp[0].syn.Load()+r.resp[1].syn.Load() >= flows }) {
		t.Fatalf("only %d SYNs of %d flows arrived", r.resp[0].syn.Load()+r.resp[1].syn.Load(), flows)
	}
	r.halt()
	seen := map[uint16]int{}
	for q, rs := range r.resp {
		if len(rs.synPorts) == 0 {
			t.Errorf("queue %d saw no flow", q)
		}
		if n := rs.synOther.Load(); n != 0 {
			t.Errorf("queue %d got %d SYNs for an unsteered port", q, n)
		}
		for p := range rs.synPorts {
			if prev, ok := seen[p]; ok {
				t.Errorf("flow from port %d on queues %d and %d", p, prev, q)
			}
			seen[p] = q
		}
		t.Logf("queue %d: %d flows", q, len(rs.synPorts))
	}
	if len(seen) != flows {
		t.Errorf("%d distinct flows seen, want %d", len(seen), flows)
	}
}

func TestLabOtherAddressesReachKernel(t *testing.T) {
	r := newLabRig(t, 2)
	l := r.l
	// A kernel address on the server end, in the server namespace: frames for
	// it must pass the program and be answered by the kernel.
	kernelIP := lab.Host(l.Subnet, 3)
	if err := lab.AddAddr(l.ServerNS, l.ServerIf, netip.PrefixFrom(kernelIP, 24)); err != nil {
		t.Fatal(err)
	}
	for id := uint16(1); id <= 3; id++ {
		if !ping(t, l, l.ClientIP, kernelIP, id) {
			t.Errorf("ping %d to the kernel's %s not answered", id, kernelIP)
		}
	}
	if n := r.resp[0].icmp.Load() + r.resp[1].icmp.Load(); n != 0 {
		t.Errorf("userspace answered %d echoes meant for the kernel", n)
	}
	// And ours still reach userspace.
	if !ping(t, l, l.ClientIP, l.ServerIP, 9) {
		t.Error("ping to percore's address not answered")
	}
}

// TestFdReadableOnRx: a shard blocks in poll on Fd when idle; a frame on the
// rx ring must wake it.
func TestFdReadableOnRx(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pf"})
	_, socks := attachLab(t, l, ProgramConfig{IP: l.ServerIP}, Config{FrameCount: 64, Logf: t.Logf}, 1)
	s := socks[0]
	pfd := []unix.PollFd{{Fd: int32(s.Fd()), Events: unix.POLLIN}}
	if n, _ := unix.Poll(pfd, 0); n != 0 {
		t.Fatalf("readable before any traffic: %+v", pfd)
	}
	// The client's kernel ARPs for our address when asked to ping it.
	echoTo(t, l)(1)
	n, err := unix.Poll(pfd, 5000)
	if err != nil || n != 1 || pfd[0].Revents&unix.POLLIN == 0 {
		t.Fatalf("poll = %d %v revents %x, want readable", n, err, pfd[0].Revents)
	}
	rx := make([]Desc, 4)
	if got := s.Receive(rx); got == 0 {
		t.Fatal("readable but nothing received")
	} else if f := s.Frame(rx[0].Addr, int(rx[0].Len)); binary.BigEndian.Uint16(f[12:]) != 0x0806 {
		t.Errorf("first frame is not the ARP request: % x", f[:14])
	}
}

// echoTo returns a function that sends an echo request with sequence
// number seq to l's server address from a raw socket in the client
// namespace (closed when the test ends). Nothing answers: the tests read
// the requests from the server's AF_XDP socket.
func echoTo(t *testing.T, l *lab.Lab) func(seq byte) {
	t.Helper()
	var fd int
	if err := l.ClientNS.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return func(seq byte) {
		req := []byte{8, 0, 0, 0, 0, 1, 0, seq}
		binary.BigEndian.PutUint16(req[2:], checksum(req))
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrInet4{Addr: l.ServerIP.As4()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLabRxTime: every frame the program steers arrives with its receive
// time, between the send and the receive, also once each chunk has been
// through the fill ring a few times (a stale stamp would be older); a
// stamp read is gone, and a chunk Fill puts on the fill ring has its stamp
// slot cleared, whatever was written there.
func TestLabRxTime(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pr"})
	_, socks := attachLab(t, l, ProgramConfig{IP: l.ServerIP}, Config{FrameCount: 64, Logf: t.Logf}, 1)
	s := socks[0]
	// A permanent neighbour entry: the client sends echo requests at once.
	if err := lab.AddNeighbour(l.ClientNS, l.ClientIf, l.ServerIP, l.ServerMAC); err != nil {
		t.Fatal(err)
	}
	echo := echoTo(t, l)
	pfd := []unix.PollFd{{Fd: int32(s.Fd()), Events: unix.POLLIN}}
	rx := make([]Desc, 8)
	const rounds = 96 // three times the 32 chunks of the fill ring
	stamped := 0
	for i := range rounds {
		before := time.Now()
		echo(byte(i))
		if n, err := unix.Poll(pfd, 5000); err != nil || n != 1 {
			t.Fatalf("round %d: poll = %d %v, want readable", i, n, err)
		}
		got := s.Receive(rx)
		after := time.Now()
		for _, d := range rx[:got] {
			at := RxClock().Add(time.Duration(s.RxStamp(d.Addr)))
			if at.Before(before) || at.After(after) {
				t.Fatalf("round %d: frame % x stamped %v, outside [%v, %v]", i, s.Frame(d.Addr, 14), at, before, after)
			}
			stamped++
		}
		s.Release(rx[:got])
		for _, d := range rx[:got] {
			if ns := s.RxStamp(d.Addr); ns != 0 {
				t.Fatalf("round %d: a stamp read once reads again: %d", i, ns)
			}
		}
	}
	if stamped < rounds {
		t.Errorf("%d frames for %d echo requests", stamped, rounds)
	}
	// A chunk written whole for transmit, then given to the fill ring.
	tx := make([]Desc, 1)
	if s.AllocTx(tx) != 1 {
		t.Fatal("no tx frame")
	}
	chunk := tx[0].Addr
	for i := range s.Frame(chunk, s.FrameSize()) {
		s.Frame(chunk, s.FrameSize())[i] = 0xa5
	}
	s.FreeTx(tx)
	if s.Fill(1) != 1 {
		t.Fatal("fill ring full")
	}
	if ns := s.RxStamp(chunk + rxHeadroom); ns != 0 {
		t.Errorf("a chunk put on the fill ring reads stamp %d", ns)
	}
	if ns := s.RxStamp(chunk); ns != 0 {
		t.Errorf("an address with no headroom reads stamp %d", ns)
	}
}
