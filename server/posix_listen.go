package server

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ErrAddrInUse is returned by ListenPosix when another socket listens on the
// address.
var ErrAddrInUse = errors.New("address already in use")

// ListenPosix opens n listening sockets on addr, one per shard, all with
// SO_REUSEPORT so the kernel spreads new connections over them by a hash of the
// connection's 4-tuple. With port 0 the first socket picks a free port and the
// others join it. It returns the non-blocking fds and the bound address.
//
// SO_REUSEPORT lets any socket of the same user join the group, so a second
// server on the same port would silently share it; a probe socket without
// SO_REUSEPORT is bound first and fails with ErrAddrInUse if anyone listens.
func ListenPosix(addr netip.AddrPort, n int) ([]int, netip.AddrPort, error) {
	if n < 1 {
		return nil, addr, fmt.Errorf("listen on %s: need at least one socket", addr)
	}
	if addr.Port() != 0 {
		probe, err := posixSocket(addr, false)
		if err != nil {
			return nil, addr, err
		}
		unix.Close(probe)
	}
	var fds []int
	fail := func(err error) ([]int, netip.AddrPort, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, addr, err
	}
	for i := 0; i < n; i++ {
		fd, err := posixSocket(addr, true)
		if err != nil {
			return fail(err)
		}
		fds = append(fds, fd)
		if err := unix.Listen(fd, 4096); err != nil {
			return fail(fmt.Errorf("listen on %s: %w", addr, err))
		}
		if i == 0 && addr.Port() == 0 {
			sa, err := unix.Getsockname(fd)
			if err != nil {
				return fail(fmt.Errorf("read bound address: %w", err))
			}
			addr = netip.AddrPortFrom(addr.Addr(), uint16(sockaddrPort(sa)))
		}
	}
	return fds, addr, nil
}

// posixSocket makes a bound, non-blocking TCP socket for addr.
func posixSocket(addr netip.AddrPort, reuseport bool) (int, error) {
	family, sa := sockaddrOf(addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, fmt.Errorf("create socket: %w", err)
	}
	// Accepted sockets inherit TCP_NODELAY from the listener: no setsockopt
	// per connection.
	opts := [][2]int{{unix.SOL_SOCKET, unix.SO_REUSEADDR}, {unix.IPPROTO_TCP, unix.TCP_NODELAY}}
	if reuseport {
		opts = append(opts, [2]int{unix.SOL_SOCKET, unix.SO_REUSEPORT})
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o[0], o[1], 1); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("set socket option %d: %w", o[1], err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return -1, fmt.Errorf("listen on %s: %w (another server holds the port; stop it or choose another --port)", addr, ErrAddrInUse)
		}
		return -1, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return fd, nil
}

func sockaddrOf(a netip.AddrPort) (int, unix.Sockaddr) {
	if a.Addr().Is4() || a.Addr().Is4In6() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().Unmap().As4()}
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
}

func sockaddrPort(sa unix.Sockaddr) int {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port
	case *unix.SockaddrInet6:
		return sa.Port
	}
	return 0
}

// rawAddrPort decodes a raw socket address filled in by accept4 without
// allocating.
func rawAddrPort(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafePointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), ntohs(p.Port))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafePointer(rsa))
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr).Unmap(), ntohs(p.Port))
	}
	return netip.AddrPort{}
}

func ntohs(p uint16) uint16 { return p>>8 | p<<8 }
