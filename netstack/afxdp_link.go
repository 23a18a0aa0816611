package netstack

import (
	"fmt"
	"time"

	"percore/afxdp"
)

// AFXDPLink is the Link over one AF_XDP socket (one NIC queue). Frame.ID is
// the frame's UMEM address; RxBatch's times are the XDP program's stamps
// (CLOCK_MONOTONIC ns: RxClock is afxdp.RxClock).
// It is owned by the shard that owns the socket; Bufs alias the UMEM and
// follow the Link contract's lifetimes.
type AFXDPLink struct {
	s     *afxdp.Socket
	mtu   int
	clock time.Time    // afxdp.RxClock, read once
	descs []afxdp.Desc // scratch for one batch
}

// NewAFXDPLink wraps s. mtu is the IP MTU (the frame holds mtu+14 bytes);
// batch is the largest batch one call moves.
func NewAFXDPLink(s *afxdp.Socket, mtu, batch int) (*AFXDPLink, error) {
	if mtu+14 > s.FrameSize()-256 {
		return nil, fmt.Errorf("netstack: mtu %d does not fit an AF_XDP frame of %d bytes (256 of headroom): use 4096-byte frames or a smaller MTU", mtu, s.FrameSize())
	}
	return &AFXDPLink{s: s, mtu: mtu, clock: afxdp.RxClock(), descs: make([]afxdp.Desc, batch)}, nil
}

// Socket returns the wrapped socket (for stats and its fd).
func (l *AFXDPLink) Socket() *afxdp.Socket { return l.s }

// RxBatch implements Link. Each stamp is read (and so cleared), at nil
// or not.
func (l *AFXDPLink) RxBatch(fs []Frame, at []int64) int {
	d := l.descs[:min(len(fs), len(l.descs))]
	n := l.s.Receive(d)
	for i := range n {
		fs[i] = Frame{Buf: l.s.Frame(d[i].Addr, int(d[i].Len)), ID: d[i].Addr}
		t := l.s.RxStamp(d[i].Addr)
		if at != nil {
			at[i] = t
		}
	}
	return n
}

// RxClock implements Link.
func (l *AFXDPLink) RxClock() time.Time { return l.clock }

// RxDone implements Link: the frames go back to the fill ring.
func (l *AFXDPLink) RxDone(fs []Frame) {
	for len(fs) > 0 {
		k := min(len(fs), len(l.descs))
		for i := range k {
			l.descs[i] = afxdp.Desc{Addr: fs[i].ID}
		}
		l.s.Release(l.descs[:k])
		fs = fs[k:]
	}
}

// TxAlloc implements Link.
func (l *AFXDPLink) TxAlloc(fs []Frame) int {
	d := l.descs[:min(len(fs), len(l.descs))]
	n := l.s.AllocTx(d)
	for i := range n {
		fs[i] = Frame{Buf: l.s.Frame(d[i].Addr, l.mtu+14), ID: d[i].Addr}
	}
	return n
}

// TxSubmit implements Link: frames go on the tx ring; Flush sends them.
func (l *AFXDPLink) TxSubmit(fs []Frame) {
	for len(fs) > 0 {
		k := min(len(fs), len(l.descs))
		for i := range k {
			l.descs[i] = afxdp.Desc{Addr: fs[i].ID, Len: uint32(len(fs[i].Buf))}
		}
		l.s.Transmit(l.descs[:k])
		fs = fs[k:]
	}
}

// TxFree implements Link.
func (l *AFXDPLink) TxFree(fs []Frame) {
	for len(fs) > 0 {
		k := min(len(fs), len(l.descs))
		for i := range k {
			l.descs[i] = afxdp.Desc{Addr: fs[i].ID}
		}
		l.s.FreeTx(l.descs[:k])
		fs = fs[k:]
	}
}

// Flush implements Link: kick the tx ring (errors other than backpressure
// are counted in the socket's KickErrors) and recycle completions.
func (l *AFXDPLink) Flush() {
	l.s.Kick()
	l.s.Complete()
}

// MTU implements Link.
func (l *AFXDPLink) MTU() int { return l.mtu }

var _ Link = (*AFXDPLink)(nil)
