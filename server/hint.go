package server

import (
	"errors"
	"fmt"

	"percore/afxdp"
	"percore/lab"
	"percore/native"
	"percore/shard"
)

// withHint adds to a start-up error the flags that would fix it. The
// libraries below return errors that name the cause; only the command knows
// its flags, so the advice that names them lives here, in one place.
func withHint(err error, o Options) error {
	h := hint(err, o)
	if h == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, h)
}

func hint(err error, o Options) string {
	var qe *native.QueueError
	switch {
	case errors.As(err, &qe):
		return fmt.Sprintf("raise them with `ethtool -L %s combined %d`, lower --smp to %d, or forward in software with --rss auto", qe.Iface, qe.Need, qe.Have)
	case errors.Is(err, native.ErrIndirRefused):
		return "use --rss queues (each shard owns several queues) or --rss auto"
	case errors.Is(err, native.ErrRSSLeftover):
		return fmt.Sprintf("restore it with `ethtool -X %s default` and remove /run/percore/%s.rss", o.Native.Iface, o.Native.Iface)
	case errors.Is(err, native.ErrNotRoot), errors.Is(err, lab.ErrNotRoot), errors.Is(err, afxdp.ErrPermission):
		return "run as root, or use --network-stack posix"
	case errors.Is(err, native.ErrNoIface), errors.Is(err, afxdp.ErrNoIface):
		return "check `ip link` for --iface, or use --lab or --network-stack posix"
	case errors.Is(err, native.ErrKernelAddr):
		return "give --host-ipv4-addr an address no kernel interface holds"
	case errors.Is(err, afxdp.ErrXDPBusy), errors.Is(err, afxdp.ErrNoAFXDP):
		return "or use --network-stack posix"
	case errors.Is(err, afxdp.ErrMTU), errors.Is(err, afxdp.ErrNoDriverXDP), errors.Is(err, native.ErrJumbo), errors.Is(err, afxdp.ErrRefused):
		return "or try --xdp-mode generic"
	case errors.Is(err, native.ErrKernel):
		return "or use --xdp-mode generic (copy mode on every queue)"
	case errors.Is(err, native.ErrGRO):
		return "or use --xdp-mode native where the driver has it"
	case errors.Is(err, native.ErrOffload):
		return "or use --xdp-mode generic, which turns them off itself (with GRO off)"
	case errors.Is(err, afxdp.ErrMemlock):
		return "or lower --xdp-frames or --max-connections"
	case errors.Is(err, afxdp.ErrNoQueue):
		return "lower --smp"
	case errors.Is(err, shard.ErrCPUNotAllowed):
		return "choose --cpuset from those"
	case errors.Is(err, shard.ErrShards):
		return "give --smp a positive number"
	case errors.Is(err, shard.ErrTooManyShards):
		return "lower --smp or widen --cpuset"
	}
	return ""
}
