package lab

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// etherTest is the local experimental EtherType (IEEE 802): no kernel
// protocol handles it, so only the test's sockets and programs see it.
const etherTest = 0x88b5

// TestBridgeCloseTwice checks that Close stops the forwarders and is idempotent.
func TestBridgeCloseTwice(t *testing.T) {
	needRoot(t)
	im, err := NewImpaired(Config{}, ImpairSpec{Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	if err := im.Bridge.Close(); err != nil {
		t.Fatal(err)
	}
	if err := im.Bridge.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatalf("second Close of the lab: %v", err)
	}
}

// bridgeRig is one bridge direction driven by hand: the lab's own bridge is
// closed, d reads from the middle's client end and writes to its server end,
// and cli sends test frames from the client end.
type bridgeRig struct {
	im   *Impaired
	d    *bridgeDir
	cli  int
	stop int
}

func newBridgeRig(t *testing.T, spec ImpairSpec, slotSize int) *bridgeRig {
	t.Helper()
	needRoot(t)
	im, err := NewImpaired(Config{}, ImpairSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	if err := im.Bridge.Close(); err != nil {
		t.Fatal(err)
	}
	var rx, tx int
	if err := im.MiddleNS.Do(func() (err error) {
		if rx, err = openPacketSocket(im.MidClientIf); err != nil {
			return err
		}
		tx, err = openPacketSocket(im.MidServerIf)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rx); unix.Close(tx) })
	cli := clientTestSocket(t, im)
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(stop) })
	d := newBridgeDir(rx, tx, NewImpairer(spec, 0, 256, slotSize), time.Now())
	return &bridgeRig{im: im, d: d, cli: cli, stop: stop}
}

// step runs one turn of the forwarding loop without waiting.
func (r *bridgeRig) step() {
	now := time.Since(r.d.start)
	r.d.recv(now)
	r.d.flush(now, r.stop)
	r.d.publish(true)
}

// TestBridgeNoAllocs runs one direction's receive, forward and publish steps
// on real sockets and checks that they allocate nothing.
func TestBridgeNoAllocs(t *testing.T) {
	r := newBridgeRig(t, ImpairSpec{Loss: 0.05, Reorder: 0.1, Duplicate: 0.05, Corrupt: 0.05, Seed: 1}, 1536)
	const runs = 100
	sendTestFrames(t, r.im, r.cli, 0, 4*(runs+1))
	if allocs := testing.AllocsPerRun(runs, r.step); allocs != 0 {
		t.Errorf("%v allocations per step, want 0", allocs)
	}
	if s := r.d.im.Stats; s.Received == 0 || s.Forwarded == 0 {
		t.Fatalf("the steps moved nothing: %+v", s)
	}
}

// TestBridgeTooLong gives the bridge slots shorter than the frames and checks
// that each is dropped and counted, not forwarded cut short.
func TestBridgeTooLong(t *testing.T) {
	r := newBridgeRig(t, ImpairSpec{}, 32) // test frames are 60 bytes
	const n = 10
	sendTestFrames(t, r.im, r.cli, 0, n)
	for i := 0; i < 100 && r.d.im.Stats.Received < n; i++ {
		r.step()
		if r.d.im.Stats.Received < n {
			time.Sleep(time.Millisecond) // frames cross the veth in softirq
		}
	}
	// The client kernel's own frames (IPv6 neighbour discovery) may come too.
	if s := r.d.im.Stats; s.Received < n || s.TooLong != s.Received || s.Forwarded != 0 {
		t.Fatalf("stats %+v: want at least %d received, all too long, none forwarded", s, n)
	}
}

// clientTestSocket opens a test socket (openTestSocket) on im's client end;
// t.Cleanup closes it.
func clientTestSocket(t *testing.T, im *Impaired) int {
	t.Helper()
	var fd int
	if err := im.ClientNS.Do(func() (err error) {
		fd, err = openTestSocket(im.ClientIf)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// openTestSocket opens an AF_PACKET socket on name (in the calling thread's
// namespace) for test EtherType frames arriving there, with a 5 s read timeout.
func openTestSocket(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(etherTest), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// sendTestFrames sends n test frames from the client end to the server MAC,
// numbered from first, on socket fd.
func sendTestFrames(t *testing.T, im *Impaired, fd int, first, n int) {
	t.Helper()
	h, err := im.ClientNS.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(im.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	ifi := l.Attrs().Index
	f := make([]byte, 60)
	copy(f, im.ServerMAC)
	copy(f[6:], im.ClientMAC)
	binary.BigEndian.PutUint16(f[12:], etherTest)
	for i := range n {
		binary.BigEndian.PutUint32(f[14:], uint32(first+i))
		if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifi, Halen: 6}); err != nil {
			t.Fatalf("send test frame: %v", err)
		}
	}
}
