package wreck

// cstate is where a connection slot is in its life.
type cstate uint8

const (
	cIdle       cstate = iota // no socket; ready to connect
	cWait                     // no socket; backing off after a connect error until wakeAt
	cConnecting               // socket connecting (EINPROGRESS)
	cOpen                     // connected: requests flow
	cDraining                 // one-shot mode: response done, waiting for the server's FIN
)

// conn is one connection slot of a shard. Its socket is replaced on error or
// close; the slot (its buffers and rings) lives for the whole run.
//
// Owned by its shard. req is either the shard's shared prebuilt requests or,
// with CheckSeq, the slot's own copy that it stamps before each write; carry
// holds an incomplete header section or chunk line between reads.
type conn struct {
	idx    int32 // index in the shard's conns; epoll events carry it
	fd     int   // -1 without a socket
	gen    int32 // bumped per socket; epoll events carry it to drop stale ones
	state  cstate
	queued bool // on the shard's pending list
	outOn  bool // EPOLLOUT is in the socket's epoll interest
	p      parser

	carry []byte // unparsed tail of the last read (an incomplete head)

	req        []byte // Pipeline copies of the request, back to back
	wpos, wend int    // bytes of req being written: [wpos, wend)

	// In-flight requests, oldest first, in rings of Pipeline entries:
	// start is the latency origin (send time, or the intended send time under
	// --rate, or connect start in one-shot mode); sent is when the request was
	// written, for --timeout.
	start, sent []int64
	head, n     int

	seqSent, seqWant uint64 // next sequence number to stamp / to expect

	since  int64 // connect start, or drain start
	wakeAt int64 // end of a connect back-off
}

// push appends an in-flight request.
func (c *conn) push(start, sent int64) {
	i := c.head + c.n
	if i >= len(c.start) {
		i -= len(c.start)
	}
	c.start[i], c.sent[i] = start, sent
	c.n++
}

// pop removes the oldest in-flight request and returns its latency origin.
func (c *conn) pop() int64 {
	t := c.start[c.head]
	c.head++
	if c.head == len(c.start) {
		c.head = 0
	}
	c.n--
	return t
}
