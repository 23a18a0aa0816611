package wreck

import (
	"fmt"
	"testing"

	"percore/lab"
)

// TestNativeQueueCounts: native wreck with two shards on a client end with
// one queue (software forwarding: shard 0 owns the queue and hands shard 1
// the replies of its flows) and with four (each shard sends on its own
// queue, and veth brings the replies back on it), against a native server
// on the same queue count. Every request completes, on both client shards
// and both server shards.
func TestNativeQueueCounts(t *testing.T) {
	requireNative(t)
	cpus := twoCPUs(t)
	for _, queues := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d queues", queues), func(t *testing.T) {
			pair := newNativePair(t, lab.Config{Prefix: fmt.Sprintf("wq%d", queues), Queues: queues, ServerRoot: true})
			srv := startNativeServer(t, pair.Lab, cpus)
			for _, c := range []struct {
				want  uint64
				extra []string
			}{{20000, nil}, {20000, []string{"--pipeline", "16"}}, {2000, []string{"--keepalive=false", "--reqs", "2000"}}} {
				before := accepted(srv)
				checkRun(t, nativeRun(t, pair, srv, cpus, c.extra...), c.want, srv, before)
			}
		})
	}
}
