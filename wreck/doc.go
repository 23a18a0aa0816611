// Package wreck is percore's HTTP/1.1 load generator, in the manner of Seastar's
// seawreck: client shards (one pinned OS thread and one epoll each) drive many
// keep-alive or one-shot connections over kernel sockets, pipeline requests,
// validate every response (status line, Content-Length or chunked framing,
// Connection: close), count errors by class, and record latency in an HDR
// histogram per shard, merged only when the run ends.
//
// Closed loop (the default), each connection keeps Pipeline requests in flight,
// written as one batch when the last batch is answered; latency runs from the
// write. Open loop (Config.Rate), request i of a shard is intended at
// start + i/rate and latency runs from that intended time, so a slow server
// or a late client cannot hide queueing (no coordinated omission); how late
// the client itself sent is reported apart as the send lag. One-shot
// (KeepAlive false) opens a connection per request and measures from connect.
//
// The request path allocates nothing: request bytes are built once per run (or
// once per connection when sequence numbers are checked), responses are parsed
// in place in a per-shard read buffer, and body bytes are skipped, never copied.
//
// wreck never hangs past its deadline: every wait is bounded by a shard tick, and
// a stalled, resetting or malformed server is counted, not waited on.
//
// Files: run.go starts and merges the shards; shard.go is a shard's loop;
// issue.go sends requests (budget, open-loop schedule, writes); receive.go reads
// and accounts responses; lifecycle.go opens and closes sockets; parser.go is
// the response parser; report.go the text and JSON output.
package wreck
