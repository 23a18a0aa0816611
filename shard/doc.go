// Package shard runs percore's shards: one goroutine locked to one OS thread pinned
// to one CPU core, looping over its pollers and its timer wheel, and blocking in
// epoll_wait when idle. Shards share nothing on the data path; cross-shard messages
// (start, stop, stats) go over single-producer single-consumer queues.
package shard
