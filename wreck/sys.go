package wreck

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysRead and sysWrite are read(2) and write(2) on non-blocking sockets
// without the scheduler hand-off of unix.Read/Write: they never block, and
// the shard's thread is locked, so there is nothing to hand off. About a
// tenth of a syscall's cost saved, twice per request.
func sysRead(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func sysWrite(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// writeOut writes p to the non-blocking socket fd until all of it is
// written or the socket is full, and returns the bytes written; the error
// is the write's other than EINTR (retried) and EAGAIN (the caller waits
// for EPOLLOUT).
func writeOut(fd int, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := sysWrite(fd, p[n:])
		switch err {
		case nil:
			n += m
		case unix.EINTR:
		case unix.EAGAIN:
			return n, nil
		default:
			return n, err
		}
	}
	return n, nil
}

// ownSockaddr copies sa: unix.Connect encodes a Sockaddr into a buffer inside
// it, so shards must not share one.
func ownSockaddr(sa unix.Sockaddr) unix.Sockaddr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		c := *sa
		return &c
	case *unix.SockaddrInet6:
		c := *sa
		return &c
	}
	return sa
}
