package lab

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Bridge forwards Ethernet frames both ways between two interfaces of one
// namespace (the middle ends of two veth pairs), passing each direction
// through its own Impairer. It reads and writes with AF_PACKET raw sockets
// bound to each interface, batching with recvmmsg/sendmmsg; PACKET_IGNORE_OUTGOING
// keeps a socket from reading back what the other direction wrote.
//
// The sockets are made inside the namespace, and each direction runs on its
// own goroutine locked to an OS thread in that namespace. A Bridge is started
// by NewBridge and stopped by Close, which waits for both goroutines and
// closes every descriptor.
type Bridge struct {
	a, b    string        // interface names
	dirs    [2]*bridgeDir // 0: A to B, 1: B to A
	stopFd  int           // eventfd: readable once Close has been called
	wg      sync.WaitGroup
	closeMu sync.Mutex
	closed  bool
}

// bridgeDir is one direction: read from rx, impair, write to tx. Its fields
// belong to its goroutine, except stats, which is published under mu.
type bridgeDir struct {
	rx, tx int // AF_PACKET sockets; tx is the other direction's rx
	im     *Impairer
	start  time.Time

	// recvmmsg/sendmmsg arguments, set up once; iovecs point into im's slots.
	rhdr  []unix.Mmsghdr
	riov  []unix.Iovec
	rslot []int32
	shdr  []unix.Mmsghdr
	siov  []unix.Iovec
	due   [][]byte
	pst   unix.TpacketStats // PACKET_STATISTICS answer, reused

	mu    sync.Mutex
	stats ImpairStats
}

// bridgeBatch is how many frames one recvmmsg or sendmmsg moves at most.
const bridgeBatch = 32

// bridgeSlots is how many frames each direction can hold (delayed, held or
// in flight); at 1 ms of delay that is room for 4 Mpps.
const bridgeSlots = 4096

// bridgeSockBuf is the socket buffer asked for on each AF_PACKET socket, so a
// burst that arrives while the forwarder sleeps is not lost in the kernel.
const bridgeSockBuf = 4 << 20

// BridgeStats is what the bridge did in each direction.
type BridgeStats struct {
	A, B   string      // the interfaces, as given to NewBridge
	AB, BA ImpairStats // A to B, B to A
}

// NewBridge starts forwarding between interfaces a and b in ns with the same
// spec both ways (decisions from independent streams of spec.Seed). mtu is the
// larger MTU of the two links; frames longer than mtu plus an Ethernet and a
// VLAN header are dropped and counted (TooLong).
func NewBridge(ns *NS, a, b string, mtu int, spec ImpairSpec) (*Bridge, error) {
	br := &Bridge{a: a, b: b, stopFd: -1}
	fds := [2]int{-1, -1}
	fail := func(err error) (*Bridge, error) {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		if br.stopFd >= 0 {
			unix.Close(br.stopFd)
		}
		return nil, err
	}
	err := ns.Do(func() error {
		for i, name := range []string{a, b} {
			fd, err := openPacketSocket(name)
			if err != nil {
				return fmt.Errorf("bridge %s<->%s in %s: %w", a, b, ns, err)
			}
			fds[i] = fd
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	br.stopFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fail(fmt.Errorf("bridge eventfd: %w", err))
	}
	slotSize := (mtu + 14 + 4 + 63) &^ 63
	start := time.Now()
	for i := range br.dirs {
		br.dirs[i] = newBridgeDir(fds[i], fds[1-i], NewImpairer(spec, uint64(i), bridgeSlots, slotSize), start)
	}
	// Each direction runs on its own OS thread inside ns, locked and never
	// unlocked, so the thread dies with the goroutine (see the package doc).
	entered := make(chan error, 2)
	br.wg.Add(2)
	for _, d := range br.dirs {
		go func() {
			defer br.wg.Done()
			runtime.LockOSThread()
			err := ns.Enter()
			entered <- err
			if err == nil {
				d.run(br.stopFd)
			}
		}()
	}
	err = errors.Join(<-entered, <-entered)
	if err != nil {
		br.Close()
		return nil, fmt.Errorf("bridge %s<->%s: %w", a, b, err)
	}
	return br, nil
}

// openPacketSocket opens an AF_PACKET raw socket that sees every frame
// arriving on interface name (in the calling thread's namespace) and none
// that leave it.
func openPacketSocket(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, fmt.Errorf("interface %s: %w", name, err)
	}
	// Protocol 0 until bind, so no frame of another interface slips in first.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("packet socket on %s: %w", name, err)
	}
	for _, o := range []struct{ level, opt, v int }{
		{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1},
		{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bridgeSockBuf},
		{unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, bridgeSockBuf},
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("packet socket on %s: setsockopt %d: %w", name, o.opt, err)
		}
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind packet socket to %s: %w", name, err)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func newBridgeDir(rx, tx int, im *Impairer, start time.Time) *bridgeDir {
	d := &bridgeDir{
		rx: rx, tx: tx, im: im, start: start,
		rhdr:  make([]unix.Mmsghdr, bridgeBatch),
		riov:  make([]unix.Iovec, bridgeBatch),
		rslot: make([]int32, bridgeBatch),
		shdr:  make([]unix.Mmsghdr, bridgeBatch),
		siov:  make([]unix.Iovec, bridgeBatch),
		due:   make([][]byte, bridgeBatch),
	}
	for i := range bridgeBatch {
		d.rhdr[i].Hdr.Iov = &d.riov[i]
		d.rhdr[i].Hdr.SetIovlen(1)
		d.shdr[i].Hdr.Iov = &d.siov[i]
		d.shdr[i].Hdr.SetIovlen(1)
	}
	return d
}

// run forwards until stopFd becomes readable. Each turn sends what is due,
// reads what has arrived, and sleeps in ppoll until a frame arrives, the next
// queued frame falls due, or Close.
func (d *bridgeDir) run(stopFd int) {
	pfd := []unix.PollFd{{Fd: int32(stopFd), Events: unix.POLLIN}, {Fd: int32(d.rx), Events: unix.POLLIN}}
	var ts unix.Timespec
	defer d.publish(true) // final counts for Stats after Close
	for {
		now := time.Since(d.start)
		d.flush(now, stopFd)
		got := d.recv(now)
		d.publish(false)
		if got > 0 {
			continue
		}
		d.publish(true) // idle: also fetch the kernel's drop count
		// With every slot in use, wait only for the queue to drain.
		fds := pfd
		if len(d.im.free) == 0 {
			fds = pfd[:1]
		}
		var tp *unix.Timespec
		if at, ok := d.im.Next(); ok {
			wait := max(at-time.Since(d.start), 0)
			ts = unix.NsecToTimespec(int64(wait))
			tp = &ts
		}
		if _, err := unix.Ppoll(fds, tp, nil); err != nil && err != unix.EINTR {
			return // cannot happen with valid descriptors; do not spin
		}
		if pfd[0].Revents != 0 {
			return
		}
	}
}

// recv reads up to one batch into free slots and pushes each frame into the
// Impairer; it returns how many frames it read.
func (d *bridgeDir) recv(now time.Duration) int {
	k := 0
	for k < bridgeBatch {
		s, buf, ok := d.im.Alloc()
		if !ok {
			break
		}
		d.rslot[k] = s
		d.riov[k].Base = &buf[0]
		d.riov[k].SetLen(len(buf))
		d.rhdr[k].Hdr.Flags = 0
		k++
	}
	n := 0
	if k > 0 {
		r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(d.rx), uintptr(unsafe.Pointer(&d.rhdr[0])), uintptr(k), unix.MSG_DONTWAIT, 0, 0)
		if errno == 0 {
			n = int(r)
		}
	}
	for i := range k {
		switch {
		case i >= n:
			d.im.Free(d.rslot[i])
		case d.rhdr[i].Hdr.Flags&unix.MSG_TRUNC != 0:
			d.im.Stats.Received++
			d.im.Stats.TooLong++
			d.im.Free(d.rslot[i])
		default:
			d.im.Push(now, d.rslot[i], int(d.rhdr[i].Len))
		}
	}
	return n
}

// flush sends every frame due at now, a batch per sendmmsg. A full socket
// buffer (EAGAIN, ENOBUFS) waits for room; any other error drops one frame,
// counted in SendErrors.
func (d *bridgeDir) flush(now time.Duration, stopFd int) {
	for {
		k := d.im.Due(now, d.due)
		if k == 0 {
			return
		}
		for i, f := range d.due[:k] {
			d.siov[i].Base = &f[0]
			d.siov[i].SetLen(len(f))
		}
		sent, failed := 0, 0
		for sent+failed < k {
			r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(d.tx), uintptr(unsafe.Pointer(&d.shdr[sent+failed])), uintptr(k-sent-failed), unix.MSG_DONTWAIT, 0, 0)
			switch {
			case errno == 0:
				sent += int(r)
			case errno == unix.EAGAIN || errno == unix.ENOBUFS:
				if !waitWritable(d.tx, stopFd) {
					failed = k - sent // closing: drop the rest
				}
			case errno == unix.EINTR:
			default:
				failed++
			}
		}
		d.im.Done(k, sent)
		if k < len(d.due) {
			return
		}
	}
}

// waitWritable waits up to 10 ms for room on fd; false once the bridge is closing.
func waitWritable(fd, stopFd int) bool {
	pfd := []unix.PollFd{{Fd: int32(stopFd), Events: unix.POLLIN}, {Fd: int32(fd), Events: unix.POLLOUT}}
	ts := unix.NsecToTimespec(int64(10 * time.Millisecond))
	unix.Ppoll(pfd, &ts, nil)
	return pfd[0].Revents == 0
}

// publish copies the Impairer's counters for Stats; with kernel set it also
// adds the frames the kernel dropped on the rx socket since the last call.
func (d *bridgeDir) publish(kernel bool) {
	if kernel {
		// Reading the statistics resets them. By hand rather than with
		// unix.GetsockoptTpacketStats, which allocates its answer.
		n := uint32(unsafe.Sizeof(d.pst))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(d.rx), unix.SOL_PACKET, unix.PACKET_STATISTICS,
			uintptr(unsafe.Pointer(&d.pst)), uintptr(unsafe.Pointer(&n)), 0)
		if errno == 0 {
			d.im.Stats.KernelDrop += uint64(d.pst.Drops)
		}
	}
	d.mu.Lock()
	d.stats = d.im.Stats
	d.mu.Unlock()
}

// Stats returns what the bridge has done so far; any goroutine may call it.
func (br *Bridge) Stats() BridgeStats {
	var s [2]ImpairStats
	for i, d := range br.dirs {
		d.mu.Lock()
		s[i] = d.stats
		d.mu.Unlock()
	}
	return BridgeStats{A: br.a, B: br.b, AB: s[0], BA: s[1]}
}

// Close stops both directions, waits for them and closes the sockets. Frames
// still queued are dropped. Idempotent.
func (br *Bridge) Close() error {
	br.closeMu.Lock()
	defer br.closeMu.Unlock()
	if br.closed {
		return nil
	}
	br.closed = true
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	_, err := unix.Write(br.stopFd, one)
	br.wg.Wait()
	errs := []error{err}
	for _, d := range br.dirs {
		errs = append(errs, unix.Close(d.rx))
	}
	errs = append(errs, unix.Close(br.stopFd))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close bridge: %w", err)
	}
	return nil
}

// String sums up both directions in one line each.
func (s BridgeStats) String() string {
	f := func(x ImpairStats) string {
		return fmt.Sprintf("received %d forwarded %d dropped %d reordered %d duplicated %d corrupted %d delayed %d dup-no-slot %d too-long %d send-errors %d kernel-drops %d",
			x.Received, x.Forwarded, x.Dropped, x.Reordered, x.Duplicated, x.Corrupted, x.Delayed, x.DupNoSlot, x.TooLong, x.SendErrors, x.KernelDrop)
	}
	return s.A + " -> " + s.B + ": " + f(s.AB) + "\n" + s.B + " -> " + s.A + ": " + f(s.BA)
}
