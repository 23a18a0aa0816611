package httpd

import (
	"bytes"
	"time"
)

// Waker is told when a connection has new output that no input or Advance
// of the stack's brought about: a file job landed. The stack sends it (posix:
// write the socket; native: wake the TCP connection). It runs on the shard.
type Waker interface {
	Wake(now time.Time)
}

// SetWaker sets whom c tells about output made by file jobs; set it once the
// connection is made (Server.NewConn).
func (c *Conn) SetWaker(w Waker) { c.waker = w }

// stream sends a file too large for the cache from disk, one chunk at a
// time: a chunk is read while the one before it is sent, and the next read
// waits until the chunk before that has been advanced, so a slow reader
// holds two chunk buffers and the disk waits for it (back-pressure). A
// Conn's stream is made once and reused for its later responses.
//
// The first chunk's job opens the file (open may wait on the disk for its
// metadata) and the stream keeps it open until it ends (job.keep, up to
// SetStreamFiles's bound per Server); each later chunk is read on the shard
// when the page cache holds it, and goes to the FileIO when it does not.
type stream struct {
	job    FileJob // the chunk read in flight, or the last one
	bufs   [2][]byte
	next   int64 // offset of the next chunk to read
	end    int64 // offset after the last byte to send
	active bool  // a response is streaming
	busy   bool  // job is with the FileIO
	pushed int   // chunks queued as output, this response and those before
	done   int   // chunks Advance has passed
}

// outChunk tags an output slice that is a stream chunk.
const outChunk = -2

// DefaultStreamFiles bounds the files a Server's streams hold open at once
// unless SetStreamFiles sets another bound: many slow downloads must not use
// up the process's descriptors (RLIMIT_NOFILE). Streams beyond it open their
// file for every chunk, on a worker.
const DefaultStreamFiles = 2048

// SetStreamFiles bounds the files s's streams hold open at once (n <= 0:
// none, every chunk opens its file); a process with many shards gives each
// its share of RLIMIT_NOFILE. Call it before the first connection.
func (s *Server) SetStreamFiles(n int) { s.files = max(n, 0) }

// startStream queues f's bytes [off, end) after the header already queued.
func (c *Conn) startStream(f *staticFile, off, end int64) {
	if c.st == nil {
		c.st = &stream{}
	}
	st := c.st
	st.active, st.next, st.end = true, off, end
	s := c.srv
	keep := s.stats.OpenFiles < uint64(s.files)
	if keep {
		s.stats.OpenFiles++ // taken now, closed by dropFile
	}
	st.job = FileJob{srv: s, file: f, keep: keep, fd: -1}
	c.readChunk()
}

// readChunk reads the next chunks while they are due and a buffer is free
// (the chunk two back has been advanced): those the page cache holds at
// once, on the shard, until one goes to the FileIO. A loop, not recursion
// through chunkLanded.
func (c *Conn) readChunk() {
	for {
		st := c.st
		if st == nil || !st.active || st.busy || st.next >= st.end || st.pushed-st.done > 1 {
			return
		}
		i := st.pushed % 2
		if st.bufs[i] == nil {
			st.bufs[i] = c.srv.takeChunk()
		}
		j := &st.job
		j.c, j.gen, j.off, j.n, j.err = c, c.gen, st.next, 0, nil
		j.buf = st.bufs[i][:min(int64(chunkSize), st.end-st.next)]
		if !c.srv.read(j) {
			st.busy = true
			return
		}
		c.chunkLanded(j)
	}
}

// chunkLanded queues a chunk that was read. A failed read ends the response
// short: the connection closes after what was queued, which tells the client
// that the body is incomplete. The caller reads the next (readChunk).
func (c *Conn) chunkLanded(j *FileJob) {
	st := c.st
	st.busy = false
	if j.err != nil || j.n == 0 {
		c.srv.stats.StreamAborts++
		st.active = false
		c.srv.dropFile(j)
		c.closing = true
		return
	}
	c.push(j.buf[:j.n:j.n], outChunk)
	st.pushed++
	st.next += int64(j.n)
	if st.next >= st.end {
		st.active = false
		c.srv.dropFile(j)
	}
}

// afterIO goes on after a file job landed: serve the requests buffered behind
// it, apply a FIN that arrived meanwhile, and tell the stack.
func (c *Conn) afterIO() {
	if !c.closing && c.r < c.w && !c.blocked() {
		c.process()
	}
	c.checkPeerClosed()
	if c.waker != nil {
		c.waker.Wake(c.now)
	}
}

// resume serves the request that waited for its path to resolve to e, or
// for its handler's job done (a handler may wait again, for another file or
// the whole of a large one).
func (c *Conn) resume(e *cacheEntry, done Job) {
	c.wait = nil
	c.ready, c.done = e, done
	c.serve()
	if c.wait == nil {
		c.endRequest()
	}
	c.afterIO()
}

// File returns the contents of the docroot file at path, a clean path such
// as "/a/b.html", from the shard's file cache, without blocking. found is
// false when the docroot has no such file (or none is served). On a cache
// miss wait is true: the handler must return at once, and it is called again
// for the same request, with the same Request, once the file has been read
// (what it wrote meanwhile is discarded). body is shared: it must not be
// modified, and it stays valid as long as it is referenced.
func (w *ResponseWriter) File(path []byte) (body []byte, found, wait bool) {
	c := w.c
	s := c.srv
	if s.cache == nil || needsClean(path) || bytes.Contains(path, dotSegment) {
		return nil, false, false
	}
	e := c.ready
	if e != nil && e.key == string(path) {
		c.ready = nil
	} else if e = s.cache.get(path); e == nil {
		if e = s.load(c, path, false); e == nil {
			return nil, false, true
		}
	}
	if e.kind != entFile {
		return nil, false, false
	}
	if e.file.streamed { // too large for the cache: read it whole for the handler
		if e.whole {
			return nil, false, false // too large for that too
		}
		if e = s.load(c, path, true); e == nil {
			return nil, false, true
		}
		if e.file.streamed {
			return nil, false, false
		}
	}
	f := e.file
	return f.full[f.headLen:], true, false
}

// cancelIO forgets the file I/O in flight for c (timeout, reset): its jobs
// land as stale and are dropped. A stream whose read is in flight is left to
// it, and c makes a new one when it next streams.
func (c *Conn) cancelIO() {
	c.gen++
	c.wait, c.again, c.shedIO = nil, false, false
	if c.exchange != nil {
		c.ready, c.done = nil, nil
	}
	if st := c.st; st != nil {
		if st.busy {
			c.st = nil // its job closes the file when it lands (Server.Complete)
			return
		}
		// Called when the output is dropped or was all advanced.
		st.active, st.pushed, st.done = false, 0, 0
		c.srv.dropFile(&st.job)
	}
}

// giveChunks returns the stream's buffers to the server; no output slice
// points into them any more.
func (c *Conn) giveChunks() {
	st := c.st
	if st == nil || st.busy {
		return
	}
	for i, b := range st.bufs {
		if b != nil && len(c.srv.chunks) < maxChunks {
			c.srv.chunks = append(c.srv.chunks, b)
		}
		st.bufs[i] = nil
	}
}
