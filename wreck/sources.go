package wreck

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// maxSources bounds --host-ipv4-addr: the native client's XDP program
// steers its address and up to 255 aliases.
const maxSources = 256

// ParseAddrs parses --host-ipv4-addr: IPv4 addresses as a comma list whose
// items may be ranges, e.g. 198.18.0.3-198.18.0.10,198.18.0.20. Each
// address adds a source's ports: a client holds more connections to one
// server than the ports of one address allow.
func ParseAddrs(s string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := parseIPv4(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: want addresses like 198.18.0.3, 198.18.0.3-198.18.0.10 or a comma list of them", s)
		}
		b := a
		if isRange {
			if b, err = parseIPv4(hi); err != nil || b.Less(a) {
				return nil, fmt.Errorf("%q: want a range low-high, like 198.18.0.3-198.18.0.10", part)
			}
		}
		for ; ; a = a.Next() {
			if len(addrs) == maxSources {
				return nil, fmt.Errorf("%q: more than %d addresses", s, maxSources)
			}
			addrs = append(addrs, a)
			if a == b {
				break
			}
		}
	}
	for i, a := range addrs {
		for _, b := range addrs[:i] {
			if a == b {
				return nil, fmt.Errorf("%q: %v twice", s, a)
			}
		}
	}
	return addrs, nil
}

// sourceBinder binds a kernel client shard's sockets to the --host-ipv4-addr
// addresses in turn, before connect, leaving the port to connect
// (IP_BIND_ADDRESS_NO_PORT): each address has its own ephemeral ports.
// Owned by the shard.
type sourceBinder struct {
	sas  []unix.SockaddrInet4
	next int
}

func newSourceBinder(addrs []netip.Addr, shard int) *sourceBinder {
	if len(addrs) == 0 {
		return nil
	}
	b := &sourceBinder{sas: make([]unix.SockaddrInet4, len(addrs)), next: shard % len(addrs)}
	for i, a := range addrs {
		b.sas[i].Addr = a.As4()
	}
	return b
}

// bind binds fd to the next source address.
func (b *sourceBinder) bind(fd int) error {
	sa := &b.sas[b.next]
	if b.next++; b.next == len(b.sas) {
		b.next = 0
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	return unix.Bind(fd, sa)
}
