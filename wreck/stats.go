package wreck

import (
	"sync/atomic"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// errClass is a class of failed request or connection.
type errClass uint8

const (
	errNon2xx    errClass = iota // a well-framed response whose status is not 2xx
	errMalformed                 // bytes that are not a valid response, an oversized header, unsolicited data
	errTimeout                   // no complete response (or connection) within --timeout
	errReset                     // ECONNRESET or EPIPE
	errClosed                    // EOF before a response completed
	errConnect                   // connect failed (refused, unreachable, out of sockets)
	errMismatch                  // X-Wreck-Seq missing or out of order (only with CheckSeq)
	numErrClasses
)

var errClassNames = [numErrClasses]string{"non2xx", "malformed", "timeout", "reset", "closed", "connect", "mismatch"}

// Counters are one shard's counts. Owned by the shard until the run ends.
type Counters struct {
	Responses uint64                // complete, well-framed responses, any status
	Bytes     uint64                // bytes read from sockets
	Connects  uint64                // connections established
	Oversized uint64                // of Malformed: header section or trailers over the limit
	Errors    [numErrClasses]uint64 // by errClass
}

func (c *Counters) add(o *Counters) {
	c.Responses += o.Responses
	c.Bytes += o.Bytes
	c.Connects += o.Connects
	c.Oversized += o.Oversized
	for i := range c.Errors {
		c.Errors[i] += o.Errors[i]
	}
}

// failures counts the errors other than non-2xx (those are responses too).
func (c *Counters) failures() uint64 {
	var n uint64
	for i := errMalformed; i < numErrClasses; i++ {
		n += c.Errors[i]
	}
	return n
}

// published is what a shard shows the progress printer: stored each tick (not
// per request), read once a second from another goroutine.
type published struct {
	responses atomic.Uint64
	failures  atomic.Uint64
	bytes     atomic.Uint64
}

// Latency is recorded in nanoseconds from 1 µs resolution up to one hour.
const (
	histMin    = 1
	histMax    = int64(3600e9)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histDigits)
}

// recordNs records v nanoseconds, clamped to the histogram's range.
func recordNs(h *hdrhistogram.Histogram, v int64) {
	h.RecordValue(min(max(v, histMin), histMax))
}
