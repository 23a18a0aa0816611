package wreck

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysPoll is ppoll(2) without the scheduler hand-off, for a native shard's
// idle sleep on its AF_XDP socket, nsec nanoseconds at most (bounded by the
// shard tick, as sysEpollWait's wait is; ppoll's resolution keeps --rate's
// intended send times without a timerfd).
func sysPoll(fds []unix.PollFd, nsec int64) (int, error) {
	ts := unix.NsecToTimespec(nsec)
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(unsafe.SliceData(fds))), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
