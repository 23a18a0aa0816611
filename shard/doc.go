// Package shard runs percore's shards: one goroutine locked to one OS thread pinned
// to one CPU core, looping over its pollers and its timer wheel, and blocking in
// epoll_wait when idle. Shards share nothing on the data path; cross-shard messages
// (start, stop, stats) go over single-producer single-consumer queues.
//
// A network stack plugs into a shard at setup (the function given to Start, run on
// the shard's own pinned thread) through four small interfaces, each called once
// per loop iteration or per event batch, never per packet:
//
//   - Poller: polled every iteration, reports whether it did work (an AF_XDP
//     queue's rings);
//   - Source: receives its epoll events, batched, with the 56-bit token it gave
//     AddFD (a listener, connections, an AF_XDP socket fd that wakes a sleeping
//     shard);
//   - Stopper: drains on stop, force-closed at the stop timeout;
//   - Reporter: adds its per-shard counters to a Report on request.
//
// Time comes from the loop: every callback gets now. Timers are intrusive
// (Timer embedded in the timed object) on the shard's hashed Wheel; a stack that
// returns its next deadline arms one Timer with it, and the loop sleeps until the
// wheel's next deadline, to the nanosecond (Config.Tick sets how fine).
//
// The server and the load generator (wreck) run on this one loop. What a
// client needs beyond a server is an option: SetNap (coalesce wake-ups before
// blocking) and a fine Tick (an open loop's send times). The package must not
// know about sockets, packets or HTTP.
package shard
