package wreck

import (
	"net/netip"
	"testing"
)

// msKey is the key of Microsoft's RSS verification suite, also the default
// of several NIC drivers.
var msKey = []byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// TestRSSPortFilter: every queue gets a share of the ports, the shares are
// disjoint and cover the range, and each kept port hashes to its queue.
func TestRSSPortFilter(t *testing.T) {
	server := netip.MustParseAddrPort("198.18.0.1:80")
	local := netip.MustParseAddr("198.18.0.3")
	const queues = 4
	filters := make([]func(uint16) bool, queues)
	for q := range filters {
		filters[q] = rssPortFilter(msKey, 128, queues, q, server, local)
	}
	counts := make([]int, queues)
	for p := 32768; p < 32768+4096; p++ {
		n := 0
		for q, f := range filters {
			if f(uint16(p)) {
				counts[q]++
				n++
				if got := rssQueue(msKey, 128, queues, server, netip.AddrPortFrom(local, uint16(p))); got != q {
					t.Fatalf("port %d kept by queue %d hashes to %d", p, q, got)
				}
			}
		}
		if n != 1 {
			t.Fatalf("port %d kept by %d queues, want exactly 1", p, n)
		}
	}
	for q, n := range counts {
		if n < 4096/queues/2 {
			t.Errorf("queue %d keeps %d of 4096 ports: the hash does not spread", q, n)
		}
	}
}
