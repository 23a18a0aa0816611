// Package wreck is percore's HTTP/1.1 load generator, in the manner of Seastar's
// seawreck: client shards (one pinned OS thread and one epoll each) drive many
// keep-alive or one-shot connections over kernel sockets, pipeline requests,
// validate every response (status line, Content-Length or chunked framing,
// Connection: close), count errors by class, and record latency in an HDR
// histogram per shard, merged only when the run ends.
//
// The request path allocates nothing: request bytes are built once per run (or
// once per connection when sequence numbers are checked), responses are parsed
// in place in a per-shard read buffer, and body bytes are skipped, never copied.
//
// wreck never hangs past its deadline: every wait is bounded by a shard tick, and
// a stalled, resetting or malformed server is counted, not waited on.
package wreck
