// Package sweep is percore's per-core scaling benchmark: for each shard count
// it starts percore (native and posix stacks) and the peers a user would pick
// instead (nginx, fasthttp, gnet), drives each with wreck and with wrk from a
// client network namespace (or, on bare metal, from another machine),
// interleaved over several rounds, and reports medians with min–max of
// requests/s, latency percentiles and whole-machine CPU-µs per request as
// markdown tables (a generated section of docs/benchmarks.md) and an SVG plot.
//
// It only orchestrates processes: every server and client is a separate
// binary started in its own process group and stopped by that group's id, and
// the lab it builds is removed on return, on error and on cancellation. The
// server never imports this package.
package sweep
