package afxdp

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// BusyPoll is preferred busy polling on a socket (Linux 5.11+), as DPDK's
// AF_XDP driver sets it: the owning shard's recvfrom and sendto run the NIC
// queue's NAPI poll themselves, so a batch costs no hardware interrupt and no
// softirq on the shard's core. The interface's napi_defer_hard_irqs and
// gro_flush_timeout keep the interrupt masked while the shard polls and bring
// it back, after gro_flush_timeout, when the shard sleeps. The zero value is
// off.
type BusyPoll struct {
	Budget  int           // SO_BUSY_POLL_BUDGET: frames per NAPI poll (at most 65535); 0: off
	Timeout time.Duration // SO_BUSY_POLL: how long one call may poll [DefaultBusyPollTimeout]
}

// DefaultBusyPollTimeout is SO_BUSY_POLL's value when BusyPoll.Timeout is 0,
// the kernel's xdpsock sample's and DPDK's.
const DefaultBusyPollTimeout = 20 * time.Microsecond

// On reports whether busy polling is asked for.
func (b BusyPoll) On() bool { return b.Budget > 0 }

// ErrBusyPoll classifies a kernel's refusal of a busy-poll option.
var ErrBusyPoll = errors.New("afxdp: the kernel refused busy polling")

// sockoptInt sets one integer socket option (unix.SetsockoptInt; tests fake it).
type sockoptInt func(fd, level, opt, value int) error

// setBusyPoll sets the three options in the order the kernel's xdpsock
// sample does. A refusal is one line naming the option and why.
func setBusyPoll(fd int, b BusyPoll, set sockoptInt) error {
	if b.Timeout == 0 {
		b.Timeout = DefaultBusyPollTimeout
	}
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1},
		{"SO_BUSY_POLL", unix.SO_BUSY_POLL, int(b.Timeout / time.Microsecond)},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, b.Budget},
	} {
		err := set(fd, unix.SOL_SOCKET, o.opt, o.val)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.ENOPROTOOPT):
			return userErr(ErrBusyPoll, err, "afxdp: %s %d: the kernel has no %s (%v): preferred busy polling needs Linux 5.11 or later", o.name, o.val, o.name, err)
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
			return userErr(ErrBusyPoll, err, "afxdp: %s %d: not permitted (%v): values above net.core.busy_read and net.core.busy_poll_budget need CAP_NET_ADMIN", o.name, o.val, err)
		case errors.Is(err, unix.EINVAL):
			return userErr(ErrBusyPoll, err, "afxdp: %s %d: out of range (%v): give a budget from 1 to 65535", o.name, o.val, err)
		}
		return userErr(ErrBusyPoll, err, "afxdp: %s %d: %v", o.name, o.val, err)
	}
	return nil
}

// BusyPolling reports whether the socket busy-polls: asked for
// (Config.BusyPoll) and accepted by the kernel.
func (s *Socket) BusyPolling() bool { return s.busyPoll }
