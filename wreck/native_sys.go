package wreck

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysPoll is poll(2) (as ppoll) without the scheduler hand-off, for a
// native shard's idle sleep on its AF_XDP socket; msec is bounded by the
// shard tick, as sysEpollWait's is.
func sysPoll(fds []unix.PollFd, msec int) (int, error) {
	ts := unix.NsecToTimespec(int64(msec) * 1e6)
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(unsafe.SliceData(fds))), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
