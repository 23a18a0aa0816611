package httpd

import "time"

// Config is fixed at start-up and shared read-only by all shards. Zero fields
// take the defaults below.
type Config struct {
	Docroot       string        // "" serves only the built-in routes
	MaxBody       int64         // larger request bodies get 413; <= 0 means DefaultMaxBody
	HeaderTimeout time.Duration // a request's header section must arrive within this; 0 means DefaultHeaderTimeout
	IdleTimeout   time.Duration // an idle keep-alive connection is closed after this; 0 means DefaultIdleTimeout
	BodyTimeout   time.Duration // a request's body must arrive within this of its header; 0 means DefaultBodyTimeout
	CacheSize     int64         // bytes of docroot files each Server (shard) keeps in memory; 0 means DefaultCacheSize
}

// Defaults for zero Config fields.
const (
	DefaultMaxBody       = 1 << 20
	DefaultHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
	DefaultBodyTimeout   = 60 * time.Second
	DefaultCacheSize     = 64 << 20
)

// Limits on request size (RFC 9112 leaves them to the server).
const (
	MaxTarget      = 8192 // request-target bytes; longer gets 414
	MaxHeaderBytes = 8192 // field lines after the request line; more gets 431
	maxMethod      = 32
	// maxRequestLine bounds an unfinished request line: method, two spaces, the
	// target and "HTTP/1.1".
	maxRequestLine = maxMethod + 2 + MaxTarget + 8
	maxChunkLine   = 4096 // chunk-size line with extensions
)

// Back-pressure and buffer sizes of one connection.
const (
	// A connection stops parsing further pipelined requests while this much
	// output, or this many slices, wait to be sent; Advance resumes it.
	maxOutBytes  = 256 << 10
	maxOutSlices = 256

	inInitial    = 4 << 10  // input buffer of a new connection
	inRetain     = 64 << 10 // larger input buffers are dropped on Release
	arenaInitial = 4 << 10  // output arena of a new connection
	// A referenced arena past arenaLimit is swapped for the other one. Two
	// arenas of this size hold all the output back-pressure lets queue, so a
	// connection never needs a third.
	arenaLimit = maxOutBytes / 2
	// A streamed file is read in chunks of this size, at most two per
	// connection at a time: one being sent, one being read. Two chunks bound
	// the bytes in flight, and a read starts only when the chunk two back is
	// acknowledged: at 128 KiB a fast path ran dry between reads, and a
	// streamed file went out slower than a cached one.
	chunkSize = 512 << 10
	maxChunks = 16 // chunk buffers a Server keeps for reuse (8 MiB)
)

func (c *Config) fillDefaults() {
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.CacheSize <= 0 {
		c.CacheSize = DefaultCacheSize
	}
}
