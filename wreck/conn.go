package wreck

// cstate is where a connection slot is in its life.
type cstate uint8

const (
	cIdle       cstate = iota // no socket; ready to connect
	cWait                     // no socket; backing off after a connect error until wakeAt
	cConnecting               // socket connecting (EINPROGRESS)
	cHandshake                // native, --tls: connected, the TLS handshake under way
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
	idx     int32  // index in the shard's conns; epoll events carry it
	fd      int    // -1 without a socket
	gen     uint32 // bumped per socket, 24 bits; epoll events carry it to drop stale ones
	state   cstate
	queued  bool // on the shard's pending list
	outOn   bool // EPOLLOUT is in the socket's epoll interest
	paced   bool // waiting for --connect-rate on the shard's paced list
	inReady bool // on the shard's ready ring (--rate, keep-alive)
	p       parser

	carry []byte // unparsed tail of the last read (an incomplete head)

	req        []byte // Pipeline copies of the request, back to back
	wpos, wend int    // bytes of req being written: [wpos, wend)

	flights // in-flight requests

	seqSent, seqWant uint64 // next sequence number to stamp / to expect

	since  int64 // connect start, or drain start
	wakeAt int64 // end of a connect back-off
}

// genMask keeps a socket generation to the 24 bits an epoll token has beside
// the slot index.
const genMask = 1<<24 - 1

// token is the epoll token of c's socket: slot index and generation.
func (c *conn) token() uint64 { return uint64(uint32(c.idx)) | uint64(c.gen)<<32 }

// flights is a connection's in-flight requests, oldest first, in a ring of
// Pipeline entries: start is the latency origin (send time, or the intended
// send time under --rate, or connect start in one-shot mode); sent is when
// the request was written, for --timeout. Both client modes embed it.
type flights struct {
	start, sent []int64
	head, n     int
}

// push appends an in-flight request.
func (f *flights) push(start, sent int64) {
	i := f.head + f.n
	if i >= len(f.start) {
		i -= len(f.start)
	}
	f.start[i], f.sent[i] = start, sent
	f.n++
}

// pop removes the oldest in-flight request and returns its latency origin.
func (f *flights) pop() int64 {
	t := f.start[f.head]
	f.head++
	if f.head == len(f.start) {
		f.head = 0
	}
	f.n--
	return t
}
