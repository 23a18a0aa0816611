package afxdp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors for conditions a caller may test with errors.Is. The
// errors returned carry a full one-line message naming the cause and the
// fix; these only classify them.
var (
	ErrPermission  = errors.New("afxdp: permission denied")
	ErrNoAFXDP     = errors.New("afxdp: kernel has no AF_XDP sockets")
	ErrMemlock     = errors.New("afxdp: umem exceeds the locked-memory limit")
	ErrXDPBusy     = errors.New("afxdp: interface already has an XDP program")
	ErrNoQueue     = errors.New("afxdp: queue out of range")
	ErrNoIface     = errors.New("afxdp: no such interface")
	ErrMTU         = errors.New("afxdp: MTU too large for native XDP")
	ErrNoDriverXDP = errors.New("afxdp: the driver has no native XDP")
	ErrRefused     = errors.New("afxdp: the driver refused the XDP program")
)

// userError is a one-line message for the user that still unwraps to its
// sentinel and the system error behind it.
type userError struct {
	msg           string
	kind, syscall error
}

func (e *userError) Error() string   { return e.msg }
func (e *userError) Unwrap() []error { return []error{e.kind, e.syscall} }

func userErr(kind, cause error, format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...), kind: kind, syscall: cause}
}

func ifaceError(name string, err error) error {
	return userErr(ErrNoIface, err, "afxdp: interface %q not found in this network namespace: check `ip link`, or enter the interface's namespace", name)
}

func queueError(name string, q, n int) error {
	return userErr(ErrNoQueue, nil, "afxdp: queue %d out of range, %s has %d rx queues: raise them with `ethtool -L %s combined %d` or use fewer shards", q, name, n, name, q+1)
}

func memlockError(size int, err error) error {
	return userErr(ErrMemlock, err, "afxdp: umem of %d bytes exceeds the locked-memory limit (%v): raise `ulimit -l`, run as root with CAP_IPC_LOCK, or use fewer frames", size, err)
}

func busyError(iface string, err error) error {
	return userErr(ErrXDPBusy, err, "afxdp: %s already has an XDP program attached by someone else: detach it with `ip link set dev %s xdp off`", iface, iface)
}

// sysErr wraps a failed system call with context; permission errors become
// a message that says what privileges are missing.
func sysErr(op string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return userErr(ErrPermission, err, "afxdp: %s: permission denied: run as root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK)", op)
	}
	return fmt.Errorf("afxdp: %s: %w", op, err)
}
