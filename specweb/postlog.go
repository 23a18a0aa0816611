package specweb

import (
	"strconv"
	"sync/atomic"
)

// RecordLen is the size of one post log record.
const RecordLen = 139

// Post is what one dynamic POST logs.
type Post struct {
	Time       int64 // Unix seconds
	Conn       int   // the client connection (its source port)
	Dir        int   // the directory, class and file posted about
	Class, Num int
	Client     int // the client number from the body
	User       int // the user id from the cookie
}

// appendRecord appends p as record seq: fixed-width fields separated by
// spaces and a newline, 139 bytes:
//
//	seq(10) time(10) conn(10) dir(5) class(1) file(1) client(10) user(10) path(73)
func (p *Post) appendRecord(b []byte, seq uint64) []byte {
	start := len(b)
	b = appendRight(b, int64(seq), 10)
	b = appendRight(append(b, ' '), p.Time, 10)
	b = appendRight(append(b, ' '), int64(p.Conn), 10)
	b = appendPadded(append(b, ' '), p.Dir, 5)
	b = append(b, ' ', byte('0'+p.Class), ' ', byte('0'+p.Num))
	b = appendRight(append(b, ' '), int64(p.Client), 10)
	b = appendRight(append(b, ' '), int64(p.User), 10)
	b = appendPath(append(b, ' ', '/'), p.Dir, p.Class, p.Num)
	for len(b)-start < RecordLen-1 {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// appendRight appends n right-aligned in width columns.
func appendRight(b []byte, n int64, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], n, 10)
	for range width - len(s) {
		b = append(b, ' ')
	}
	return append(b, s...)
}

const (
	chunkRecords = 1024
	maxChunks    = 1 << 14 // 16M records, 2.3 GB
)

// PostLog is one ordered log that every shard appends to without waiting.
// Append takes a sequence number from one atomic counter and writes the
// record into that number's slot; a per-slot flag publishes it once whole.
// Slots live in chunks allocated on first use (the one CAS winner's is
// kept). AppendTo reads the prefix of published records.
type PostLog struct {
	next   atomic.Uint64
	chunks [maxChunks]atomic.Pointer[chunk]
}

type chunk struct {
	done [chunkRecords]atomic.Bool
	data [chunkRecords * RecordLen]byte
}

// Append logs p and returns its sequence number; ok is false when the log
// is full.
func (l *PostLog) Append(p *Post) (seq uint64, ok bool) {
	seq = l.next.Add(1) - 1
	if seq >= maxChunks*chunkRecords {
		return seq, false
	}
	c := l.chunk(seq / chunkRecords)
	i := int(seq % chunkRecords)
	p.appendRecord(c.data[i*RecordLen:i*RecordLen:(i+1)*RecordLen], seq)
	c.done[i].Store(true)
	return seq, true
}

func (l *PostLog) chunk(n uint64) *chunk {
	if c := l.chunks[n].Load(); c != nil {
		return c
	}
	l.chunks[n].CompareAndSwap(nil, new(chunk))
	return l.chunks[n].Load()
}

// Len is the number of published records in order: those before the first
// one still being written.
func (l *PostLog) Len() int {
	n := min(l.next.Load(), maxChunks*chunkRecords)
	for seq := uint64(0); seq < n; seq++ {
		c := l.chunks[seq/chunkRecords].Load()
		if c == nil || !c.done[seq%chunkRecords].Load() {
			return int(seq)
		}
	}
	return int(n)
}

// AppendTo appends the published records, in order, to b.
func (l *PostLog) AppendTo(b []byte) []byte {
	n := uint64(l.Len())
	for seq := uint64(0); seq < n; seq += chunkRecords {
		c := l.chunks[seq/chunkRecords].Load()
		b = append(b, c.data[:min(n-seq, chunkRecords)*RecordLen]...)
	}
	return b
}
