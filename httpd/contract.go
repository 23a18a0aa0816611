package httpd

// CONTRACT (temporary file): the API the stacks code against. The httpd work
// replaces this file with the real implementation, keeping these signatures
// (adding to them is fine; changing them means telling the stack owners).

import (
	"io"
	"net/netip"
	"time"
)

// Config is fixed at start-up and shared read-only by all shards.
type Config struct {
	Docroot       string        // "" serves only the built-in routes
	MaxBody       int64         // larger request bodies get 413
	HeaderTimeout time.Duration // a request's header section must arrive within this
	IdleTimeout   time.Duration // an idle keep-alive connection is closed after this
}

// Handler serves one request of a dynamic route. The Request and its slices are
// valid only until the handler returns; the response is written into w.
type Handler func(w *ResponseWriter, r *Request)

// Site is the router and static file cache, built once before the shards start
// and read by all of them without locks.
type Site struct{}

// NewSite loads the docroot (if any) into memory and registers the built-in "/".
func NewSite(cfg Config) (*Site, error) { panic("contract") }

// Handle registers h for an exact path ("/api") or, with a trailing slash, a
// prefix ("/api/"). Call before the shards start.
func (s *Site) Handle(pattern string, h Handler) { panic("contract") }

// Server is one shard's HTTP responder: its Date header, counters, connection
// pool and access-log buffer. Owned by one shard; not safe for concurrent use.
type Server struct{}

// NewServer makes shard's responder. log may be nil (no access log); it receives
// whole buffered batches of Common Log Format lines from Tick, off the request path.
func NewServer(site *Site, log io.Writer) *Server { panic("contract") }

// Tick refreshes the Date header (call at least once a second) and flushes the
// access-log buffer.
func (s *Server) Tick(now time.Time) { panic("contract") }

// Stats returns this shard's counters (merged across shards by the caller).
func (s *Server) Stats() Stats { panic("contract") }

// Stats are one shard's HTTP counters.
type Stats struct {
	Requests  uint64
	Responses [6]uint64 // by status class: [2] is 2xx, [4] is 4xx ...
	BadInput  uint64    // requests answered 4xx/5xx for malformed input
	Timeouts  uint64    // connections closed by header or idle timeout
}

// NewConn takes a connection from the shard's pool.
func (s *Server) NewConn(remote netip.AddrPort, now time.Time) *Conn { panic("contract") }

// Release returns c to the pool; c must not be used afterwards.
func (s *Server) Release(c *Conn) { panic("contract") }

// Conn is one HTTP connection: its input buffer, parser state and queue of
// pending response bytes. Owned by one shard.
type Conn struct{}

// ReadBuf returns free space to receive into. An empty slice means back-pressure:
// stop reading until Output drains.
func (c *Conn) ReadBuf() []byte { panic("contract") }

// Received tells c that n bytes were written into ReadBuf; it parses every complete
// request and queues the responses in request order.
func (c *Conn) Received(n int, now time.Time) { panic("contract") }

// Feed copies p into the input buffer and parses, for stacks that own their own
// receive buffers; it returns how many bytes it took (fewer under back-pressure).
func (c *Conn) Feed(p []byte, now time.Time) int { panic("contract") }

// Output returns the pending response bytes, in order, as immutable slices. They
// stay valid until Advance passes them, so a stack may send them without copying
// and keep them for retransmission until acknowledged.
func (c *Conn) Output() [][]byte { panic("contract") }

// Advance marks the first n bytes of Output as done (written or acknowledged).
func (c *Conn) Advance(n int) { panic("contract") }

// PeerClosed records that the peer sent FIN / EOF.
func (c *Conn) PeerClosed(now time.Time) { panic("contract") }

// Closing reports that the connection is finished: close it once Output is empty.
func (c *Conn) Closing() bool { panic("contract") }

// Deadline is when the connection times out (header or idle timeout), zero if none.
// The stack calls Expire when it passes.
func (c *Conn) Deadline() time.Time { panic("contract") }

// Expire closes the connection for a timeout if its deadline has passed; it
// reports whether it did.
func (c *Conn) Expire(now time.Time) bool { panic("contract") }

// Request is a parsed request; slices point into the connection's input buffer.
type Request struct {
	Method, Target, Path, Query []byte
	Body                        []byte
}

// ResponseWriter builds a dynamic response in the connection's output buffer.
type ResponseWriter struct{}

// Header adds a response header.
func (w *ResponseWriter) Header(name, value string) { panic("contract") }

// WriteHeader sets the status code (default 200).
func (w *ResponseWriter) WriteHeader(code int) { panic("contract") }

// Write appends body bytes.
func (w *ResponseWriter) Write(p []byte) (int, error) { panic("contract") }
