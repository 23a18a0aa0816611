package lab

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// etherTest is the local experimental EtherType (IEEE 802): no kernel
// protocol handles it, so only the test's sockets and programs see it.
const etherTest = 0x88b5

// TestImpairXDPTx checks that frames an XDP program on the server end sends
// back out (XDP_TX) cross the bridge, thanks to the XDP_PASS program on the
// middle end, and that without that program the server end drops them.
func TestImpairXDPTx(t *testing.T) {
	needRoot(t)
	im, err := NewImpaired(Config{Queues: 2}, ImpairSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	bounce, err := attachXDP(im.ServerNS, im.ServerIf, xdpTx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bounce.Close() })

	// rx sees the bounced test frames arriving back at the client end.
	var rx int
	if err := im.ClientNS.Do(func() (err error) {
		rx, err = openTestSocket(im.ClientIf)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rx) })

	const n = 32
	sendTestFrames(t, im, rx, 0, n)
	seen := make([]bool, n)
	buf := make([]byte, 2048)
	for range n {
		m, err := unix.Read(rx, buf) // SO_RCVTIMEO bounds the wait
		if err != nil {
			t.Fatalf("waiting for bounced frames: %v (seen %v)\n%v", err, seen, im.Bridge.Stats())
		}
		seq := binary.BigEndian.Uint32(buf[14:])
		if m < 18 || seq >= n || seen[seq] {
			t.Fatalf("unexpected frame %x", buf[:m])
		}
		seen[seq] = true
	}

	// Without a program on the middle end, XDP_TX has nowhere to go.
	before := xdpTxErrors(t, im.ServerNS, im.ServerIf)
	if err := im.xdpPass[1].Close(); err != nil {
		t.Fatal(err)
	}
	sendTestFrames(t, im, rx, n, n)
	end := time.Now().Add(5 * time.Second)
	for xdpTxErrors(t, im.ServerNS, im.ServerIf)-before < n {
		if time.Now().After(end) {
			t.Fatalf("server end counted %d xdp_tx_errors of %d frames without a peer program", xdpTxErrors(t, im.ServerNS, im.ServerIf)-before, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m, _, err := unix.Recvfrom(rx, buf, unix.MSG_DONTWAIT); err == nil {
		t.Fatalf("frame %x crossed without a peer program", buf[:m])
	}
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

// xdpTxErrors sums a veth end's per-queue xdp_tx_errors (ethtool -S).
func xdpTxErrors(t *testing.T, ns *NS, name string) uint64 {
	t.Helper()
	var sum uint64
	if err := ns.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		st, err := e.Stats(name)
		if err != nil {
			return err
		}
		for k, v := range st {
			if strings.HasPrefix(k, "rx_queue_") && strings.HasSuffix(k, "_xdp_tx_errors") {
				sum += v
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("ethtool -S %s: %v", name, err)
	}
	return sum
}
