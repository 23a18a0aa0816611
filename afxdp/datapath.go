package afxdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The data path: every method below moves a batch, allocates nothing and uses
// atomics only on the ring indices. All are for the owning shard only.

// valid reports whether [addr, addr+n) lies inside one UMEM chunk.
func (s *Socket) valid(addr uint64, n uint32) bool {
	return addr < uint64(len(s.umem)) && addr&^s.frameMask+uint64(n) <= uint64(s.frameSize)
}

// Receive fills descs with received frames and returns how many. The frames
// belong to the caller until given back with Release (or sent with
// Transmit). A descriptor the kernel should never produce (outside the UMEM,
// or longer than a chunk) is dropped and counted in RxBadDesc.
func (s *Socket) Receive(descs []Desc) int {
	idx, got := s.rx.peek(uint32(len(descs)))
	if got == 0 {
		// A zero-copy driver may wait for a wakeup to refill; a busy-polling
		// socket runs the NAPI poll that fills the rx ring.
		if s.busyPoll || s.fill.needWakeup() {
			s.wakeRx()
		}
		return 0
	}
	n := 0
	for i := uint32(0); i < got; i++ {
		d := s.rx.descs[(idx+i)&s.rx.mask]
		if !s.valid(d.Addr, d.Len) {
			s.st.rxBadDesc++
			s.putFree(d.Addr)
			continue
		}
		descs[n] = Desc{Addr: d.Addr, Len: d.Len}
		n++
	}
	s.rx.release(got)
	s.st.rxFrames += uint64(n)
	s.st.rxBatches++
	return n
}

// Frame returns the UMEM bytes of a frame: n bytes at addr, or nil when they
// are not inside one chunk. The slice aliases the UMEM; it is valid while the
// caller owns the frame.
func (s *Socket) Frame(addr uint64, n int) []byte {
	if n < 0 || n > int(s.frameSize) || !s.valid(addr, uint32(n)) {
		return nil
	}
	return s.umem[addr : addr+uint64(n) : addr+uint64(n)]
}

// Release gives received frames back to the kernel through the fill ring,
// and wakes the driver if it asked for them. The kernel publishes how far it
// has read the fill ring after it publishes the rx ring, so for a moment the
// ring can look full with a frame it took already in our hands: such frames
// wait in unfilled and go first at the next Release (FillDeferred), so that
// a received frame never moves to the transmit side's free list.
func (s *Socket) Release(descs []Desc) {
	idx, got := s.fill.reserve(uint32(len(s.unfilled) + len(descs)))
	n := uint32(0)
	for ; n < got && len(s.unfilled) > 0; n++ {
		last := len(s.unfilled) - 1
		s.fill.addrs[(idx+n)&s.fill.mask] = s.unfilled[last]
		s.unfilled = s.unfilled[:last]
	}
	for _, d := range descs {
		if d.Addr >= uint64(len(s.umem)) {
			s.st.fillBadAddr++
			continue
		}
		if n == got {
			s.unfilled = append(s.unfilled, d.Addr&s.frameMask)
			s.st.fillDeferred++
			continue
		}
		s.fill.addrs[(idx+n)&s.fill.mask] = d.Addr & s.frameMask
		n++
	}
	s.fill.cachedProd -= got - n // give back slots taken by bad addresses
	s.fill.submit(n)
	s.wakeFill(n)
}

// wakeFill wakes a driver that asked for fill-ring frames (zero-copy: it
// found too few to post to the NIC and stopped receiving) once n more are
// there. Waiting for the rx ring to run empty would leave the NIC without
// buffers, dropping, while the shard works through its backlog.
func (s *Socket) wakeFill(n uint32) {
	if n > 0 && s.fill.needWakeup() {
		s.wakeRx()
	}
}

// wakeRx is one recvfrom: it schedules the driver's NAPI poll, or runs it
// on a busy-polling socket. Raw, as kick.
func (s *Socket) wakeRx() {
	s.st.rxWakeups++
	unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
}

// Fill moves up to n frames from the socket's free list to the fill ring
// and returns how many it moved: a shard that transmits received frames
// directly (reflection) uses it to keep the fill ring stocked. It clears
// their stamp slots (RxStamp): a frame sent from a chunk wrote there.
func (s *Socket) Fill(n int) int {
	n = min(n, len(s.free))
	idx, got := s.fill.reserve(uint32(n))
	for i := uint32(0); i < got; i++ {
		last := len(s.free) - 1
		s.fill.addrs[(idx+i)&s.fill.mask] = s.free[last]
		s.clearStamp(s.free[last])
		s.free = s.free[:last]
	}
	s.fill.submit(got)
	s.wakeFill(got)
	return int(got)
}

// AllocTx fills descs with free frames for transmission (Len set to the chunk
// size) and returns how many; 0 when the free list is empty (Complete may
// refill it). Write into Frame(d.Addr, ...), set Len, then Transmit or FreeTx.
func (s *Socket) AllocTx(descs []Desc) int {
	n := min(len(descs), len(s.free))
	for i := 0; i < n; i++ {
		last := len(s.free) - 1
		descs[i] = Desc{Addr: s.free[last], Len: s.frameSize}
		s.free = s.free[:last]
	}
	return n
}

// FreeTx returns frames from AllocTx (or Receive) that will not be sent to
// the free list.
func (s *Socket) FreeTx(descs []Desc) {
	for _, d := range descs {
		s.putFree(d.Addr)
	}
}

// putFree puts the chunk holding addr on the free list. An address outside
// the UMEM, or one more frame than the UMEM has (a caller freeing a frame
// twice), is dropped and counted in FreeBad.
func (s *Socket) putFree(addr uint64) {
	if addr >= uint64(len(s.umem)) || len(s.free) == cap(s.free) {
		s.st.freeBad++
		return
	}
	s.free = append(s.free, addr&s.frameMask)
}

// Transmit queues frames on the tx ring and takes ownership of all of them:
// a descriptor outside the UMEM, empty, or crossing its chunk is dropped and
// counted (TxBadDesc); a frame that finds the tx ring full goes back to the
// free list and is counted (TxRingFull). It returns how many were queued.
// Frames go out on Kick.
func (s *Socket) Transmit(descs []Desc) int {
	idx, got := s.tx.reserve(uint32(len(descs)))
	n := uint32(0)
	for _, d := range descs {
		if d.Len == 0 || !s.valid(d.Addr, d.Len) {
			s.st.txBadDesc++
			s.putFree(d.Addr)
			continue
		}
		if n == got {
			s.st.txRingFull++
			s.putFree(d.Addr)
			continue
		}
		s.tx.descs[(idx+n)&s.tx.mask] = Desc{Addr: d.Addr, Len: d.Len}
		n++
	}
	s.tx.cachedProd -= got - n
	s.tx.submit(n)
	s.st.txFrames += uint64(n)
	if n > 0 {
		s.st.txBatches++
	}
	return int(n)
}

// maxKicks bounds the sendto calls of one Kick.
const maxKicks = 64

// Kick makes the kernel send what is on the tx ring. Zero-copy: one sendto,
// only while the driver has frames of ours to send or complete, and then
// only when it asked for a wakeup or the socket busy-polls (the kernel's
// xdpsock sample does the same): a driver without need-wakeup support keeps
// the flag set, and an idle shard must not make a call per poll. Copy mode: the kernel sends only a limited number of
// frames per call (32 by default) and always wants the call, so Kick keeps
// calling while frames are outstanding, at most maxKicks times. EAGAIN,
// EBUSY and ENOBUFS are normal backpressure (reap completions and kick again
// later) and counted, not returned. It returns only an unexpected errno, for
// example ENETDOWN.
func (s *Socket) Kick() error {
	if s.zeroCopy {
		// A busy-polling socket's sendto runs the NAPI poll that sends and
		// completes.
		if s.txAwaited() == 0 || !(s.busyPoll || s.tx.needWakeup()) {
			return nil
		}
		return s.kick()
	}
	for i := 0; i < maxKicks && s.tx.outstanding() > 0; i++ {
		if err := s.kick(); err != nil || s.lastBusy {
			return err
		}
	}
	return nil
}

// kick is one sendto. lastBusy is set when the kernel could not make room.
//
// The call never blocks (MSG_DONTWAIT), but in copy mode it builds and
// sends an skb per frame, often for more than the 20 us after which sysmon
// takes the P of a goroutine in a system call; on a machine with a P to
// spare the runtime then starts a thread to run it, which finds nothing
// and sleeps again: two context switches a kick, and sysmon back at its
// fastest polling. A raw call keeps the P (the shard's thread is locked to
// it anyway).
func (s *Socket) kick() error {
	s.st.kicks++
	s.lastBusy = false
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	switch e {
	case 0:
	case unix.EAGAIN:
		s.st.kickBusy++
	case unix.EBUSY, unix.ENOBUFS:
		s.st.kickBusy++
		s.lastBusy = true
	default:
		s.st.kickErrors++
		return e
	}
	return nil
}

// txAwaited returns how many transmitted frames the kernel has not completed
// yet: on the tx ring or being sent.
func (s *Socket) txAwaited() uint64 {
	return s.st.txFrames - s.st.completed - uint64(s.comp.outstanding())
}

// TxOutstanding returns how many frames are on the tx ring not yet taken
// by the kernel; the shard keeps kicking while it is above zero.
func (s *Socket) TxOutstanding() int { return int(s.tx.outstanding()) }

// Complete moves frames the kernel has sent from the completion ring to the
// free list and returns how many.
func (s *Socket) Complete() int {
	idx, got := s.comp.peek(uint32(cap(s.free) - len(s.free)))
	for i := uint32(0); i < got; i++ {
		s.free = append(s.free, s.comp.addrs[(idx+i)&s.comp.mask]&s.frameMask)
	}
	s.comp.release(got)
	s.st.completed += uint64(got)
	return int(got)
}

// FillQueued is the frames on the fill ring that the kernel has not taken
// yet: what it can still receive into.
func (s *Socket) FillQueued() int { return int(s.fill.outstanding()) }

// FreeFrames returns the length of the free list.
func (s *Socket) FreeFrames() int { return len(s.free) }

// Stats holds a socket's numbers. Kernel numbers come from XDP_STATISTICS.
// Each field's stat tag says what it counts (count, drop, error or gauge) for
// reports.
type Stats struct {
	// Kernel (XDP_STATISTICS).
	RxDropped       uint64 `stat:"drop"`  // dropped for other reasons than the two below
	RxInvalidDescs  uint64 `stat:"drop"`  // invalid fill descriptors
	TxInvalidDescs  uint64 `stat:"drop"`  // invalid tx descriptors
	RxRingFull      uint64 `stat:"drop"`  // dropped: rx ring full
	RxFillRingEmpty uint64 `stat:"count"` // times the fill ring was empty
	TxRingEmpty     uint64 `stat:"count"` // times the tx ring was empty on a kick

	// Socket.
	RxFrames, RxBatches uint64 `stat:"count"`
	TxFrames, TxBatches uint64 `stat:"count"`
	Completed           uint64 `stat:"count"`
	RxBadDesc           uint64 `stat:"drop"`  // kernel rx descriptors outside the UMEM (dropped)
	TxBadDesc           uint64 `stat:"drop"`  // caller tx descriptors outside the UMEM/chunk or empty (dropped)
	TxRingFull          uint64 `stat:"drop"`  // frames dropped because the tx ring was full
	FillBadAddr         uint64 `stat:"drop"`  // addresses outside the UMEM given to Release (dropped)
	FillDeferred        uint64 `stat:"count"` // received frames Release kept for the next one: the fill ring looked full
	FreeBad             uint64 `stat:"drop"`  // frames freed outside the UMEM or twice (dropped)
	Kicks               uint64 `stat:"count"` // sendto calls
	KickBusy            uint64 `stat:"count"` // EAGAIN/EBUSY/ENOBUFS answers (normal backpressure)
	KickErrors          uint64 `stat:"error"` // other errors
	RxWakeups           uint64 `stat:"count"` // recvfrom calls: fill-ring wakeups, busy polls on an empty rx ring
	FreeFrames          int    `stat:"gauge"` // frames in the free list now
	FillQueued          int    `stat:"gauge"` // frames on the fill ring, waiting for the kernel
	RxQueued            int    `stat:"gauge"` // frames on the rx ring, waiting for Receive
	TxOutstanding       int    `stat:"gauge"` // frames on the tx ring not yet taken by the kernel
}

// Stats returns the socket's counters; one getsockopt, no allocation.
func (s *Socket) Stats() (Stats, error) {
	var k unix.XDPStatistics
	err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&k), unsafe.Sizeof(k))
	st := Stats{
		RxDropped: k.Rx_dropped, RxInvalidDescs: k.Rx_invalid_descs, TxInvalidDescs: k.Tx_invalid_descs,
		RxRingFull: k.Rx_ring_full, RxFillRingEmpty: k.Rx_fill_ring_empty_descs, TxRingEmpty: k.Tx_ring_empty_descs,
		RxFrames: s.st.rxFrames, RxBatches: s.st.rxBatches, TxFrames: s.st.txFrames, TxBatches: s.st.txBatches,
		Completed: s.st.completed, RxBadDesc: s.st.rxBadDesc, TxBadDesc: s.st.txBadDesc, TxRingFull: s.st.txRingFull,
		FillBadAddr: s.st.fillBadAddr, FillDeferred: s.st.fillDeferred, FreeBad: s.st.freeBad, Kicks: s.st.kicks, KickBusy: s.st.kickBusy, KickErrors: s.st.kickErrors,
		RxWakeups: s.st.rxWakeups, FreeFrames: len(s.free), TxOutstanding: s.TxOutstanding(),
		FillQueued: int(s.fill.outstanding()), RxQueued: int(s.rx.outstanding()),
	}
	if err != nil {
		return st, sysErr("get statistics", err)
	}
	return st, nil
}
