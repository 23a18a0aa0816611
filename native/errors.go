package native

import (
	"errors"
	"fmt"
)

// Sentinel errors for the checks Open makes, to test with errors.Is (a
// command adds the flag to fix). The errors returned carry the details.
var (
	ErrNotRoot      = errors.New("native stack needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) for AF_XDP and XDP")
	ErrNoNetns      = errors.New("no such network namespace")
	ErrNoIface      = errors.New("no such interface in the network namespace")
	ErrNotEthernet  = errors.New("interface has no Ethernet address")
	ErrMTU          = errors.New("interface MTU too small")
	ErrTooFewQueues = errors.New("too few rx queues: one per shard")
	ErrKernelAddr   = errors.New("address held by the kernel")
	ErrIndirRefused = errors.New("the driver has no RSS indirection table or refused the one asked")
	ErrRSSLeftover  = errors.New("cannot restore the RSS indirection table a run that did not stop cleanly left")
)

// QueueError is ErrTooFewQueues with the counts: the interface has Have rx
// queues and the shards Need one each.
type QueueError struct {
	Iface      string
	Have, Need int
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("native: %v: %s has %d, %d shards need %d", ErrTooFewQueues, e.Iface, e.Have, e.Need, e.Need)
}

func (e *QueueError) Unwrap() error { return ErrTooFewQueues }
