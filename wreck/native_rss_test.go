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

// TestToeplitz checks the hash against the IPv4-with-TCP vectors of
// Microsoft's "Verifying the RSS Hash Calculation".
func TestToeplitz(t *testing.T) {
	for _, v := range []struct {
		src, dst string
		want     uint32
	}{
		{"66.9.149.187:2794", "161.142.100.80:1766", 0x51ccc178},
		{"199.92.111.2:14230", "65.69.140.83:4739", 0xc626b0ea},
		{"24.19.198.95:12898", "12.22.207.184:38024", 0x5c2b394a},
		{"38.27.205.30:48228", "209.142.163.6:2217", 0xafc7327f},
		{"153.39.163.191:44251", "202.188.127.2:1303", 0x10e828a2},
	} {
		src, dst := netip.MustParseAddrPort(v.src), netip.MustParseAddrPort(v.dst)
		s, d := src.Addr().As4(), dst.Addr().As4()
		in := append(append(s[:], d[:]...), byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port()))
		if got := toeplitz(msKey, in); got != v.want {
			t.Errorf("toeplitz(%s -> %s) = %#08x, want %#08x", v.src, v.dst, got, v.want)
		}
	}
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
