// Package server glues a network stack to httpd on each shard: the posix
// stack (kernel sockets: one SO_REUSEPORT listener and one epoll per shard,
// posix*.go) and the native stack (httpd on a native.Queue, native*.go),
// start-up from Options (options.go parses the httpd command's flags), the
// graceful stop, and the shards' counters (report.go, stats.go, and the
// Prometheus endpoint through package metrics).
//
// Its errors name options and causes; Main, the command's entry point, adds
// the flags that fix them (hint.go). Protocol logic belongs below it: TCP in
// netstack, HTTP in httpd. The public API over it is package percore.
package server
