// Package httpd is percore's HTTP/1.1 responder: an incremental, allocation-free
// request parser (RFC 9112), a router with exact and prefix routes, a static file
// cache whose responses are prepared whole at start-up, and a per-shard access log.
//
// It is transport-agnostic: a stack (posix or the userspace netstack) feeds it the
// bytes of one connection and drains responses as immutable byte slices, which the
// userspace TCP stack can send without copying. It must not know which stack carries
// the bytes, read a clock (time is an argument) or start goroutines.
package httpd
