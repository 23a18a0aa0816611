package native

import "math/bits"

// Sizing is what one queue holds for a number of connections: the one
// place the UMEM, its rings and TCP's SYN backlog follow the load.
type Sizing struct {
	Conns      int // TCP connections the queue's table holds
	Frames     int // UMEM frames, half receive and half transmit
	Ring       int // entries of each AF_XDP ring: the fill ring holds every receive frame, the completion ring every transmit frame
	SynBacklog int // SYN-RECEIVED entries before SYN cookies
	Memory     int // bytes of buffers (TCP receive, httpd input and output) before backpressure: the default memory budget
}

// The bounds of SizeFor. Receive frames absorb what arrives between two
// polls, and a burst from many connections at once is about one segment
// each (a request, an ACK, a SYN), so two frames a connection up to the
// cap: beyond it, connections are mostly idle and 64Ki frames (128 MiB of
// 2 KiB frames at MTU 1500) carry the bursts that can arrive between polls.
// The UMEM is committed whole when the socket registers it (the kernel pins
// every page at XDP_UMEM_REG, even of a mapping never touched), so it is
// sized here, up front, rather than grown.
const (
	minFrames  = 4096
	maxFrames  = 1 << 16
	minBacklog = 128
	maxBacklog = 1 << 15
)

// The memory budget's rule: a quarter of a 64 KiB receive window for each
// connection, so that a quarter of them may hold a full window at once
// (out-of-order data, or a request body in flight), the rest seeing their
// windows held back; at least 32 MiB for small tables, and at most 512 MiB
// so that a million connections on two shards stay within 1 GiB of
// buffers.
const (
	memPerConn = 16 << 10
	minMemory  = 32 << 20
	maxMemory  = 512 << 20
)

// SizeFor sizes a queue for conns connections; frames, when not 0, is an
// explicit UMEM frame count (a power of two) that overrides the rule.
func SizeFor(conns, frames int) Sizing {
	s := Sizing{Conns: conns, Frames: frames}
	if s.Frames == 0 {
		s.Frames = min(max(ceilPow2(2*conns), minFrames), maxFrames)
	}
	s.Ring = s.Frames / 2
	// Half the table may be half-open: a burst of SYNs that size finds
	// room, cookies answer beyond it, and established connections keep
	// the other half.
	s.SynBacklog = min(max(conns/2, minBacklog), maxBacklog)
	s.Memory = min(max(conns*memPerConn, minMemory), maxMemory)
	return s
}

// RxFrames is the UMEM frames the queue receives into: what can arrive
// between two polls, one frame a segment.
func (s Sizing) RxFrames() int { return s.Frames / 2 }

// UMEMBytes is the memory of the UMEM at frameSize bytes a frame.
func (s Sizing) UMEMBytes(frameSize int) int { return s.Frames * frameSize }

// ceilPow2 is the least power of two at or above n (1 for n <= 1).
func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}
