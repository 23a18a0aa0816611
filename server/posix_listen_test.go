package server

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReuseportBalance shows that the kernel's default SO_REUSEPORT hash spreads
// connections from different source ports over the shards' listeners: 400
// loopback connections to a two-socket group, then each socket's accept queue
// is counted. The hash is over the 4-tuple, so the split is binomial around
// half; each side must get at least a fifth (about eight standard deviations
// below the mean), which fails only if the kernel stopped balancing.
func TestReuseportBalance(t *testing.T) {
	fds, addr, err := ListenPosix(netip.MustParseAddrPort("127.0.0.1:0"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	const n = 400
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	counts := make([]int, len(fds))
	var rsa unix.RawSockaddrAny
	drain := func() {
		for i, fd := range fds {
			for {
				cfd, err := accept4(fd, &rsa, unix.SOCK_CLOEXEC)
				if err != nil {
					break
				}
				if got := rawAddrPort(&rsa); !got.Addr().IsLoopback() || got.Port() == 0 {
					t.Errorf("accepted peer address %v", got)
				}
				unix.Close(cfd)
				counts[i]++
			}
		}
	}
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		if i%50 == 49 { // keep the accept queues short
			drain()
		}
	}
	drain()
	t.Logf("connections per listener: %v", counts)
	if counts[0]+counts[1] != n {
		t.Fatalf("accepted %d of %d connections", counts[0]+counts[1], n)
	}
	for i, c := range counts {
		if c < n/5 {
			t.Fatalf("listener %d got %d of %d connections: the reuseport hash does not balance", i, c, n)
		}
	}
}

func TestListenPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := netip.MustParseAddrPort(l.Addr().String())
	if fds, _, err := ListenPosix(busy, 2); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("ListenPosix on a port in use: fds %v, err %v; want ErrAddrInUse", fds, err)
	}
	// A second reuseport group on the same port must be refused too, though
	// SO_REUSEPORT alone would let it join the first.
	fds, addr, err := ListenPosix(netip.MustParseAddrPort("127.0.0.1:0"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if fds2, _, err := ListenPosix(addr, 1); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("second server on %v: fds %v, err %v; want ErrAddrInUse", addr, fds2, err)
	}
}

// TestAcceptedInheritsNoDelay: the posix stack sets TCP_NODELAY on its
// listeners only, relying on accepted sockets inheriting it.
func TestAcceptedInheritsNoDelay(t *testing.T) {
	fds, addr, err := ListenPosix(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	c, err := net.Dial("tcp4", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pfd := []unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 5000); n != 1 {
		t.Fatalf("listener not readable: %d %v", n, err)
	}
	fd, _, err := unix.Accept4(fds[0], unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY); err != nil || v == 0 {
		t.Fatalf("accepted socket TCP_NODELAY = %d %v, want on", v, err)
	}
}
