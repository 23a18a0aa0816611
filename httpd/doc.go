// Package httpd is percore's HTTP/1.1 responder: an incremental, allocation-free
// request parser (RFC 9112), a router with exact and prefix routes, a per-shard
// docroot cache bounded in bytes whose entries are prepared responses, and a
// per-shard access log.
//
// It is transport-agnostic: a stack (posix or the userspace netstack) feeds it the
// bytes of one connection and drains responses as immutable byte slices, which the
// userspace TCP stack can send without copying. It must not know which stack carries
// the bytes, read a clock (time is an argument) or start goroutines.
//
// # Ownership
//
// A Site (routes, the docroot directory) is built once and shared read-only by
// all shards. Each shard owns one Server (Date prefixes, counters, a pool of
// Conns, the access-log buffer, the file cache) and the Conns it hands out;
// nothing here locks.
//
// # Files
//
// A docroot path is looked up in the shard's cache (S3-FIFO, see fileCache); a
// hit is served from the prepared response without a system call. A miss
// becomes a FileJob that the stack's FileIO runs off the shard (open, fstat,
// read), and the request waits for it, with the requests pipelined behind it,
// while the shard serves other connections; Server.Complete, on the shard,
// caches the result and serves the waiting requests. Files larger than an
// eighth of the cache stream from disk in chunks, two at most in memory per
// connection. The docroot is not indexed: a path is found when it is first
// asked for, so a docroot of millions of files costs nothing at start.
// Site.Reload (SIGHUP) empties the caches so changed files are served;
// between reloads a cached file is served as it was read.
//
// # A connection's life
//
//	c := srv.NewConn(remote, now)
//	buf := c.ReadBuf(); n := read(buf); c.Received(n, now)   // or c.Feed(p, now)
//	writev(c.Output()); c.Advance(written)                     // repeat
//	c.PeerClosed(now) on EOF; c.Expire(now) when c.Deadline() passes
//	close once c.Closing() && c.Pending() == 0; srv.Release(c)
//
// Output slices stay valid until Advance passes them. Hello and static responses
// are references to prepared bytes: the shard's per-second block holding the
// status line, Server and Date (Tick makes a new block each second and never
// writes an old one), and the file's prepared header fields and body. Dynamic,
// error and redirect responses are copied into one of two per-connection arenas,
// each rewritten only after every slice into it has been advanced.
//
// While 256 KiB or 256 slices of output wait, parsing stops and ReadBuf is
// empty; Advance resumes parsing the requests already buffered. After an error
// response, Connection: close, a timeout or the peer's EOF, Closing is true and
// further input is taken and discarded.
//
// # Choices
//
//   - "/d" for a docroot directory with an index.html redirects (301) to "/d/",
//     which serves the index, as nginx does; a directory without one is 404.
//   - Symbolic links in the docroot are not followed, and dotfiles and
//     dot-directories (.git, .env) are not served.
//   - Lookup order: exact routes, longest prefix route, static files, the
//     built-in hello at "/", 404. A docroot index.html therefore replaces hello.
//   - Paths are percent-decoded and normalised before lookup; "..", encoded "/"
//     or "\", and NUL are answered 400. Files are opened below the docroot
//     directory with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS).
//   - Static files answer Range with 206 (one range), 416, or 200 whole (several
//     ranges), If-Match and If-Unmodified-Since with 412, and If-None-Match and
//     If-Modified-Since with 304, in RFC 9110's order (see ranges.go).
//   - Every response carries Content-Length except 204 and a handler's 304,
//     where RFC 9110 8.6 forbids it; static 304s carry the 200's length.
//   - "OPTIONS *" gets 200 with Allow; other asterisk-form and authority-form
//     targets get 400.
//   - Bare LF line endings are refused (400), as are leading whitespace lines
//     inside the header section (obs-fold).
//   - A header timeout closes without a response (no 408), as nginx does.
package httpd
