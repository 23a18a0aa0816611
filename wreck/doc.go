// Package wreck is percore's HTTP/1.1 load generator, in the manner of Seastar's
// seawreck: client shards (package shard's loops, one pinned OS thread
// each) drive many keep-alive or one-shot connections, over kernel sockets or
// over percore's native stack (package native: an AF_XDP queue and a
// userspace TCP per shard), pipeline requests, validate every response
// (status line, Content-Length or chunked framing, Connection: close), count
// errors by class, and record latency in an HDR histogram per shard, merged
// only when the run ends.
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
// wreck never hangs past its deadline: each shard ends its run on a timer at
// the deadline, every connection's wait is bounded by --timeout and checked
// each tick, a stalled, resetting or malformed server is counted, not waited
// on, and Run stops the shards a few ticks after the deadline whatever they do.
//
// The SPECweb99 workload (Config.Workload) replaces the one request with
// paced users: each is one connection slot that draws its next request from
// the workload's mixes, checks every answer against the file set (package
// specweb/fileset, which links no server code), and asks again when its bytes
// so far allow at 400,000 bit/s; the report adds conforming connections and
// the run's validity. Kernel sockets only so far.
//
// Files: run.go starts the shards and is the control plane; acct.go is a
// shard's accounting and schedule, shared by both modes; kernel.go is the
// kernel-socket client (issue.go sends requests, receive.go reads and accounts
// responses, lifecycle.go opens and closes sockets); native_run.go and
// native_client.go are the native client; parser.go is the response parser;
// report.go the text and JSON output; specweb_mix.go draws the SPECweb99
// requests, specweb_check.go builds them and checks their answers,
// specweb_client.go runs the users and specweb_run.go reports.
package wreck
