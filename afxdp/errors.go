package afxdp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Sentinel errors for conditions a caller may want to test with errors.Is.
// Their text is a one-line cause and fix.
var (
	ErrPermission = errors.New("afxdp: permission denied: run as root (needs CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) or use --network-stack posix")
	ErrNoAFXDP    = errors.New("afxdp: kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS): use --network-stack posix")
	ErrMemlock    = errors.New("afxdp: UMEM exceeds the locked-memory limit: raise `ulimit -l`, run as root with CAP_IPC_LOCK, or use fewer/smaller frames")
	ErrXDPBusy    = errors.New("afxdp: another XDP program is already attached to the interface: detach it (`ip link set dev IFACE xdp off`) or use --network-stack posix")
)

// ifaceError says an interface does not exist in the caller's namespace.
func ifaceError(name string, err error) error {
	return fmt.Errorf("afxdp: interface %q not found in this network namespace (%v): check `ip link`, enter the interface's namespace, or use --network-stack posix", name, err)
}

// queueError says a queue index is beyond the interface's rx queues.
func queueError(name string, q, n int) error {
	return fmt.Errorf("afxdp: queue %d out of range, %s has %d rx queues: raise them with `ethtool -L %s combined %d` or use fewer shards", q, name, n, name, q+1)
}

// sysErr wraps a failed system call with context, mapping permission errors to
// ErrPermission so the user sees the fix.
func sysErr(op string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: %w", op, ErrPermission)
	}
	return fmt.Errorf("afxdp: %s: %w", op, err)
}
