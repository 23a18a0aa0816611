package afxdp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// RaiseMemlock lifts RLIMIT_MEMLOCK for the whole process, as cilium/ebpf's
// rlimit.RemoveMemlock does for maps: to infinity when the process may
// (CAP_SYS_RESOURCE), else the soft limit up to the hard one. A UMEM counts
// against this limit unless the process has CAP_IPC_LOCK. cmd/httpd calls it
// once at start-up; Open never changes process limits by itself.
func RaiseMemlock() error {
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &inf); err == nil {
		return nil
	}
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &cur); err != nil {
		return fmt.Errorf("afxdp: get memlock limit: %w", err)
	}
	cur.Cur = cur.Max
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &cur); err != nil {
		return fmt.Errorf("afxdp: raise memlock limit: %w", err)
	}
	return nil
}
