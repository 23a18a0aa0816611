package lab

import (
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
)

// counter makes names and subnets unique among labs of one process; the pid
// makes them unique among processes.
var counter atomic.Uint32

// uniqueID returns a small number that differs between concurrent labs of this
// process and, with high likelihood, of other processes.
func uniqueID() uint32 {
	return uint32(os.Getpid())*131 + counter.Add(1)
}

// Name returns prefix+id+suffix cut to fit IFNAMSIZ-1 (15) bytes, keeping the
// unique part. Used for both namespace and interface names.
func Name(prefix string, id uint32, suffix string) string {
	mid := fmt.Sprintf("%x", id)
	room := 15 - len(mid) - len(suffix)
	if room < 0 {
		room = 0
	}
	if len(prefix) > room {
		prefix = prefix[:room]
	}
	s := prefix + mid + suffix
	if len(s) > 15 {
		s = s[len(s)-15:]
	}
	return s
}

// Subnet returns a /24 inside 198.18.0.0/15 picked from id (512 choices), so
// concurrent labs most likely use distinct subnets. Because each lab lives in
// its own namespaces a clash would still be harmless.
func Subnet(id uint32) netip.Prefix {
	i := id % 512
	a := netip.AddrFrom4([4]byte{198, 18 + byte(i/256), byte(i % 256), 0})
	return netip.PrefixFrom(a, 24)
}

// Host returns the n-th address of a /24 subnet (n in 1..254).
func Host(p netip.Prefix, n byte) netip.Addr {
	b := p.Addr().As4()
	b[3] = n
	return netip.AddrFrom4(b)
}
