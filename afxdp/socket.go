package afxdp

import (
	"errors"
	"fmt"
	"log"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BindMode chooses how the socket binds to its queue.
type BindMode int

const (
	// BindAuto tries zero-copy and falls back to copy mode.
	BindAuto BindMode = iota
	// BindCopy forces copy mode (XDP_COPY).
	BindCopy
	// BindZeroCopy forces zero-copy mode (XDP_ZEROCOPY) and fails without it.
	BindZeroCopy
)

// Config describes one socket. Zero fields take the defaults in brackets.
type Config struct {
	Interface   string   // network interface, in the calling thread's namespace
	Queue       int      // rx/tx queue index
	FrameSize   int      // UMEM chunk size: 2048 or 4096 [4096]
	FrameCount  int      // UMEM chunks, a power of two [4096]
	TxFrames    int      // chunks reserved for transmit; the rest feed the fill ring [FrameCount/2]
	RingSize    int      // entries of each of the four rings, a power of two [FrameCount]
	Bind        BindMode // [BindAuto]
	NoHugePages bool     // do not try hugepages (MAP_HUGETLB, then MADV_HUGEPAGE)
	BusyPoll    BusyPoll // preferred busy polling [off]
	// Logf gets the one line that says which mode the socket bound in
	// [log.Printf]; set it to func(string, ...any){} to silence.
	Logf func(format string, args ...any)
}

// Socket is an AF_XDP socket bound to one (interface, queue) with its own
// UMEM. It is owned by one shard: no method may be called concurrently with
// another, except Fd. Frame memory is valid until Close.
//
// Frame ownership: every UMEM frame is at any time either in the fill ring or
// the rx ring (the kernel's; in zero-copy, also posted to the NIC, on no
// ring at all, between the two), held by the caller (between Receive and
// Release/Transmit, or between AllocTx and Transmit/FreeTx), in the tx or
// completion ring (the kernel's), in the socket's free list, or (a received
// frame Release could not put on the fill ring yet) in its unfilled list.
type Socket struct {
	fd        int
	ifindex   int
	queue     int
	zeroCopy  bool
	huge      bool
	frameSize uint32
	frameMask uint64 // ^(frameSize-1)
	umem      []byte
	ringMem   [4][]byte // fill, comp, rx, tx mappings

	fill, comp, rx, tx ring

	free []uint64 // frames owned by the socket, LIFO; cap is FrameCount
	// unfilled holds received frames that Release could not put on the
	// fill ring yet (see Release); cap is FrameCount.
	unfilled []uint64

	st       counters
	lastBusy bool // the last kick got EBUSY or ENOBUFS
	busyPoll bool // recvfrom and sendto run the queue's NAPI poll (BusyPoll)
}

// counters are the socket's own numbers, private to the owning shard.
type counters struct {
	rxFrames, rxBatches, txFrames, txBatches, completed uint64
	rxBadDesc, txBadDesc, txRingFull, fillBadAddr       uint64
	fillDeferred                                        uint64
	kicks, kickBusy, kickErrors, rxWakeups              uint64
	freeBad                                             uint64
}

// Open creates the UMEM and rings and binds the socket. It must run on a
// thread in the interface's network namespace; afterwards any thread may use
// the socket. The socket receives nothing until its fd is in the XSKMAP of an
// attached Program (Program.Register).
func Open(c Config) (*Socket, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(c.Interface)
	if err != nil {
		return nil, ifaceError(c.Interface, err)
	}
	if n, err := RxQueues(ifi.Index); err == nil && c.Queue >= n {
		return nil, queueError(c.Interface, c.Queue, n)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EAFNOSUPPORT) {
			return nil, userErr(ErrNoAFXDP, err, "afxdp: kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")
		}
		return nil, sysErr("create socket", err)
	}
	s := &Socket{fd: fd, ifindex: ifi.Index, queue: c.Queue, frameSize: uint32(c.FrameSize)}
	s.frameMask = ^uint64(c.FrameSize - 1)
	if err := s.setup(c); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (c *Config) defaults() error {
	if c.FrameSize == 0 {
		c.FrameSize = 4096
	}
	if c.FrameCount == 0 {
		c.FrameCount = 4096
	}
	if c.TxFrames == 0 {
		c.TxFrames = c.FrameCount / 2
	}
	if c.RingSize == 0 {
		c.RingSize = c.FrameCount
	}
	if c.Logf == nil {
		c.Logf = log.Printf
	}
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	switch {
	case c.FrameSize != 2048 && c.FrameSize != 4096:
		return fmt.Errorf("afxdp: frame size %d: use 2048 or 4096", c.FrameSize)
	case !pow2(c.FrameCount) || !pow2(c.RingSize):
		return fmt.Errorf("afxdp: frame count %d and ring size %d must be powers of two", c.FrameCount, c.RingSize)
	case c.TxFrames < 0 || c.TxFrames >= c.FrameCount:
		return fmt.Errorf("afxdp: tx frames %d must leave rx frames out of %d", c.TxFrames, c.FrameCount)
	case c.FrameCount-c.TxFrames > c.RingSize || c.TxFrames > c.RingSize: // fill ring holds every rx frame, completion ring every tx frame
		return fmt.Errorf("afxdp: ring size %d too small for %d frames", c.RingSize, c.FrameCount)
	case c.Queue < 0:
		return fmt.Errorf("afxdp: negative queue %d", c.Queue)
	}
	return nil
}

func (s *Socket) setup(c Config) error {
	var err error
	size := c.FrameSize * c.FrameCount
	if s.umem, s.huge, err = mapUMEM(size, !c.NoHugePages); err != nil {
		return err
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(size), Size: uint32(c.FrameSize)}
	if err := setsockopt(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) {
			return memlockError(size, err)
		}
		return sysErr("register umem", err)
	}
	rs := uint32(c.RingSize)
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_XDP, opt, int(rs)); err != nil {
			return sysErr("set ring size", err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return sysErr("get mmap offsets", err)
	}
	maps := []struct {
		off   unix.XDPRingOffset
		pgoff int64
		r     *ring
		desc  bool
		prod  bool
	}{
		{off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, &s.fill, false, true},
		{off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, &s.comp, false, false},
		{off.Rx, unix.XDP_PGOFF_RX_RING, &s.rx, true, false},
		{off.Tx, unix.XDP_PGOFF_TX_RING, &s.tx, true, true},
	}
	for i, m := range maps {
		ent := uint64(8)
		if m.desc {
			ent = uint64(unsafe.Sizeof(Desc{}))
		}
		mem, err := unix.Mmap(s.fd, m.pgoff, int(m.off.Desc+uint64(rs)*ent),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return sysErr("map ring", err)
		}
		s.ringMem[i] = mem
		initRing(m.r, mem, m.off, rs, m.desc, m.prod)
	}
	if c.BusyPoll.On() {
		// The socket works without it, only with an interrupt per batch.
		if err := setBusyPoll(s.fd, c.BusyPoll, unix.SetsockoptInt); err != nil {
			c.Logf("afxdp: %s queue %d: busy polling off: %v", c.Interface, c.Queue, err)
		} else {
			s.busyPoll = true
		}
	}
	if err := s.bind(c); err != nil {
		return err
	}
	// Copy mode sends at most this many frames per kick (32 unless the
	// kernel lets us raise it, 6.16+); best effort.
	unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, c.RingSize)

	s.stock(c.FrameCount, c.TxFrames)
	return nil
}

// stock shares out the UMEM's count chunks: the first count-tx go to
// the fill ring for the kernel to receive into, the rest to the free list
// for transmit.
func (s *Socket) stock(count, tx int) {
	rxFrames := count - tx
	s.free = make([]uint64, 0, count)
	s.unfilled = make([]uint64, 0, count)
	for i := count - 1; i >= rxFrames; i-- {
		s.free = append(s.free, uint64(i)*uint64(s.frameSize))
	}
	idx, got := s.fill.reserve(uint32(rxFrames))
	for i := uint32(0); i < got; i++ {
		s.fill.addrs[(idx+i)&s.fill.mask] = uint64(i) * uint64(s.frameSize)
	}
	s.fill.submit(got)
}

// The waits of bind on a busy queue: doubling from bindBusyWait while
// not above bindBusyWaitMax, about 1.3 s in all.
const (
	bindBusyWait    = 5 * time.Millisecond
	bindBusyWaitMax = 640 * time.Millisecond
)

func (s *Socket) bind(c Config) error {
	try := func(flags uint16) error {
		sa := &unix.SockaddrXDP{Flags: flags | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(s.ifindex), QueueID: uint32(c.Queue)}
		// A closed socket lets go of its queue later, from a kernel work
		// queue under the RTNL lock (xp_release_deferred), so a queue that
		// a socket of ours closed a moment ago can still answer EBUSY: give
		// it about a second before calling it held.
		for wait := bindBusyWait; ; wait *= 2 {
			err := unix.Bind(s.fd, sa)
			if !errors.Is(err, unix.EBUSY) || wait > bindBusyWaitMax {
				return err
			}
			time.Sleep(wait)
		}
	}
	var err error
	if c.Bind != BindCopy {
		if err = try(unix.XDP_ZEROCOPY); err == nil {
			s.zeroCopy = true
			c.Logf("afxdp: %s queue %d bound in zero-copy mode%s", c.Interface, c.Queue, s.bound(c))
			return nil
		}
		if c.Bind == BindZeroCopy {
			if errors.Is(err, unix.EOPNOTSUPP) {
				return fmt.Errorf("afxdp: bind %s queue %d zero-copy: the driver has no zero-copy AF_XDP (%w): allow copy mode", c.Interface, c.Queue, err)
			}
			return sysErr(fmt.Sprintf("bind %s queue %d zero-copy", c.Interface, c.Queue), err)
		}
	}
	if err2 := try(unix.XDP_COPY); err2 != nil {
		if errors.Is(err2, unix.EINVAL) {
			if n, qerr := RxQueues(s.ifindex); qerr == nil && c.Queue >= n {
				return queueError(c.Interface, c.Queue, n)
			}
		}
		if errors.Is(err2, unix.EBUSY) {
			return fmt.Errorf("afxdp: bind %s queue %d: another AF_XDP socket holds this queue: stop it or use another queue", c.Interface, c.Queue)
		}
		return sysErr(fmt.Sprintf("bind %s queue %d", c.Interface, c.Queue), err2)
	}
	if err != nil {
		c.Logf("afxdp: %s queue %d bound in copy mode (zero-copy unsupported: %v)%s", c.Interface, c.Queue, err, s.bound(c))
	} else {
		c.Logf("afxdp: %s queue %d bound in copy mode%s", c.Interface, c.Queue, s.bound(c))
	}
	return nil
}

// bound is the rest of the bind line: where the UMEM lives and whether the
// socket busy-polls, so that a queue that fell short of the others shows.
func (s *Socket) bound(c Config) string {
	pages := ", UMEM in hugepages"
	if !s.huge {
		pages = ", UMEM in 4 KiB pages"
		if thp := transparentHuge(s.umem); thp > 0 {
			pages = fmt.Sprintf(", UMEM in transparent hugepages (%d of %d MiB)", thp>>20, len(s.umem)>>20)
		} else if !c.NoHugePages {
			pages += " (no hugepages free)"
		}
	}
	if s.busyPoll {
		return fmt.Sprintf("%s, busy polling (budget %d)", pages, c.BusyPoll.Budget)
	}
	return pages
}

// Close unmaps the rings and UMEM and closes the socket, which also removes
// it from any XSKMAP. Frames and slices from Frame are invalid afterwards.
// Safe to call twice.
func (s *Socket) Close() error {
	var errs []error
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	for i, m := range s.ringMem {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
			s.ringMem[i] = nil
		}
	}
	if s.umem != nil {
		errs = append(errs, unmapUMEM(s.umem))
		s.umem = nil
	}
	s.fill, s.comp, s.rx, s.tx = ring{}, ring{}, ring{}, ring{}
	s.free = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("afxdp: close: %w", err)
	}
	return nil
}

// Fd returns the socket's file descriptor, for XSKMAP registration and for
// poll/epoll (readable: rx ring has frames) when the shard is idle.
func (s *Socket) Fd() int { return s.fd }

// Queue returns the queue index the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// ZeroCopy reports whether the socket bound in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// HugePages reports whether the UMEM came from hugepages.
func (s *Socket) HugePages() bool { return s.huge }

// FrameSize returns the UMEM chunk size: the largest frame plus headroom.
func (s *Socket) FrameSize() int { return int(s.frameSize) }

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}
