package shard

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollWait is epoll_pwait2(2): the events of epfd, blocking at most timeout
// (<0: until one comes), to the nanosecond.
//
// A busy shard waits with a raw system call, without the scheduler's
// hand-off: its thread is locked, so there is nothing to hand its P to, and
// a blocking call would have sysmon retake the P after 20 us and the shard win
// it back as it wakes, a context switch and a third more CPU per request for a
// client that sleeps every few requests (and about a tenth more for the
// server). The runtime's preemption signal interrupts the raw call (EINTR), so
// a stop-the-world waits for a sleeping shard no longer than for a running
// one, and Start leaves a P for the rest of the program. But sysmon also
// preempts a goroutine that has run for 10 ms, so a shard idle for longer
// (handoff) blocks the usual way: an idle process then sleeps undisturbed.
func epollWait(epfd int, evs []unix.EpollEvent, timeout time.Duration, handoff bool) (int, error) {
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	// The pointers are converted in the calls themselves, which keeps
	// what they point to in place until the calls return.
	var n uintptr
	var e unix.Errno
	if handoff {
		n, _, e = unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(evs))), uintptr(len(evs)), uintptr(unsafe.Pointer(ts)), 0, 0)
	} else {
		n, _, e = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(evs))), uintptr(len(evs)), uintptr(unsafe.Pointer(ts)), 0, 0)
	}
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// epollWaitMs is epoll_wait(2) for kernels before 5.11, which lack
// epoll_pwait2: timeout rounded up to the millisecond.
func epollWaitMs(epfd int, evs []unix.EpollEvent, timeout time.Duration, handoff bool) (int, error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	var n uintptr
	var e unix.Errno
	if handoff {
		n, _, e = unix.Syscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(evs))), uintptr(len(evs)), uintptr(ms), 0, 0)
	} else {
		n, _, e = unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(evs))), uintptr(len(evs)), uintptr(ms), 0, 0)
	}
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// nanosleep sleeps d, raw for the same reason as epollWait.
func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
