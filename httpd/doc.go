// Package httpd is percore's HTTP/1.1 responder: an incremental, allocation-free
// request parser (RFC 9112), a router with exact and prefix routes, a static file
// cache whose responses are prepared whole at start-up, and a per-shard access log.
//
// It is transport-agnostic: a stack (posix or the userspace netstack) feeds it the
// bytes of one connection and drains responses as immutable byte slices, which the
// userspace TCP stack can send without copying. It must not know which stack carries
// the bytes, read a clock (time is an argument) or start goroutines.
//
// # Ownership
//
// A Site (routes, static files) is built once and shared read-only by all
// shards. Each shard owns one Server (Date prefixes, counters, a pool of Conns,
// the access-log buffer) and the Conns it hands out; nothing here locks.
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
//     or "\", and NUL are answered 400. Files are served only from the
//     in-memory cache, so no request reaches the file system.
//   - Every response carries Content-Length except 204 and a handler's 304,
//     where RFC 9110 8.6 forbids it; static 304s carry the 200's length.
//   - "OPTIONS *" gets 200 with Allow; other asterisk-form and authority-form
//     targets get 400.
//   - Bare LF line endings are refused (400), as are leading whitespace lines
//     inside the header section (obs-fold).
//   - A header timeout closes without a response (no 408), as nginx does.
package httpd
