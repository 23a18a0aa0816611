package server

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw syscalls of the posix stack's hot path, written out so they allocate
// nothing: unix.Accept4 allocates a Sockaddr per call and unix.Writev an iovec
// slice per call.
//
// They are raw (RawSyscall: no hand-off to the scheduler) because every
// descriptor here is non-blocking, so no call waits, but a write that
// delivers over loopback can run the receiver's TCP for longer than the 20 us
// after which sysmon takes the P of a goroutine in a system call; the
// runtime then starts a thread to run it, which finds nothing and sleeps
// again (two context switches), and sysmon goes back to its fastest
// polling. A shard's thread is locked to its goroutine anyway.

func unsafePointer(rsa *unix.RawSockaddrAny) unsafe.Pointer { return unsafe.Pointer(rsa) }

// accept4 accepts one connection into rsa.
func accept4(fd int, rsa *unix.RawSockaddrAny, flags int) (int, error) {
	l := uint32(unix.SizeofSockaddrAny)
	nfd, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(rsa)), uintptr(unsafe.Pointer(&l)), uintptr(flags), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(nfd), nil
}

// writev writes iov (which the caller reuses) to fd.
func writev(fd int, iov []unix.Iovec) (int, error) {
	if len(iov) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// read reads into p.
func read(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// write writes p to fd.
func write(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
