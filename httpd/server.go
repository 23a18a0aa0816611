package httpd

import (
	"io"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Server is one shard's HTTP responder: its Date header, counters, connection
// pool and access-log buffer. Owned by one shard; not safe for concurrent use.
// It reads no clock: time comes in through NewConn, Received, Tick and Expire.
type Server struct {
	site    *Site
	date    *dateBlock // current second's prefixes; replaced, never modified
	stats   Stats
	pool    []*Conn
	xs      []*exchange // exchanges idle connections gave back
	ins     [][]byte    // input buffers idle connections gave back (Conn.shed)
	arenas  [][]byte    // output arenas idle connections gave back
	chunks  [][]byte    // stream chunk buffers idle connections gave back
	log     io.Writer
	logBuf  []byte
	cache   *fileCache          // the docroot's files this shard serves; nil without a docroot
	epoch   uint64              // the site's reload epoch the cache is of
	loading map[string]*FileJob // paths being resolved, with the connections waiting
	io      FileIO              // nil: files are read inline
	mem     Memory              // nil: buffers charged to no budget (memory.go)
	files   int                 // files streams may hold open at once (SetStreamFiles)

	// nowait reads from the page cache alone (readNowait); nil where the
	// kernel or the file system cannot.
	nowait func(fd int, b []byte, off int64) (int, error)
}

// Stats are one shard's HTTP counters. Each field's stat tag says what it
// counts (count, drop, error or gauge) for reports; "-" marks one reported by
// hand.
type Stats struct {
	Requests   uint64    `stat:"count"`
	Responses  [6]uint64 `stat:"-"`     // by status class: [2] is 2xx, [4] is 4xx ... (one counter per class)
	BadInput   uint64    `stat:"count"` // requests answered 4xx/5xx for malformed input
	Timeouts   uint64    `stat:"count"` // connections closed by header, body or idle timeout
	Panics     uint64    `stat:"error"` // handler panics, answered 500 and closed
	LogDropped uint64    `stat:"error"` // access-log lines dropped for a full buffer, plus failed batch writes
	MemoryShed uint64    `stat:"drop"`  // requests answered 503: their input outgrew its buffer with the memory budget spent

	CacheHits      uint64 `stat:"count"` // docroot paths found in the shard's cache
	CacheMisses    uint64 `stat:"count"` // docroot paths not in it (resolved by a file job, or joined one in flight)
	CacheEvictions uint64 `stat:"count"` // entries evicted to stay within the cache size
	FileJobs       uint64 `stat:"count"` // file jobs run: paths resolved and stream chunks read
	Offloads       uint64 `stat:"count"` // handler jobs run off the shard (ResponseWriter.Offload)
	FileShed       uint64 `stat:"drop"`  // requests answered 503: a file or handler job was due with the FileIO full
	StreamAborts   uint64 `stat:"error"` // streamed responses cut (file changed or unreadable): connection closed
	InlineChunks   uint64 `stat:"count"` // stream chunks read on the shard from the page cache, with no file job
	OpenFiles      uint64 `stat:"gauge"` // files held open by streams (at most SetStreamFiles's bound)
}

// Add merges o into s (for reports across shards).
func (s *Stats) Add(o Stats) {
	s.Requests += o.Requests
	for i := range s.Responses {
		s.Responses[i] += o.Responses[i]
	}
	s.BadInput += o.BadInput
	s.Timeouts += o.Timeouts
	s.Panics += o.Panics
	s.LogDropped += o.LogDropped
	s.MemoryShed += o.MemoryShed
	s.CacheHits += o.CacheHits
	s.CacheMisses += o.CacheMisses
	s.CacheEvictions += o.CacheEvictions
	s.FileJobs += o.FileJobs
	s.Offloads += o.Offloads
	s.FileShed += o.FileShed
	s.StreamAborts += o.StreamAborts
	s.InlineChunks += o.InlineChunks
	s.OpenFiles += o.OpenFiles
}

const (
	logBufInitial = 64 << 10
	maxLogBuf     = 4 << 20 // past this, lines are dropped (and counted) until Tick
	maxPool       = 4096
)

// NewServer makes shard's responder. log may be nil (no access log); it receives
// whole buffered batches of Common Log Format lines from Tick, off the request path.
func NewServer(site *Site, log io.Writer) *Server {
	s := &Server{site: site, log: log, nowait: readNowait, files: DefaultStreamFiles}
	if log != nil {
		s.logBuf = make([]byte, 0, logBufInitial)
	}
	if site.root >= 0 {
		s.cache = newFileCache(site.cfg.CacheSize, &s.stats)
		s.epoch = site.epoch.Load()
		s.loading = make(map[string]*FileJob)
	}
	return s
}

// SetFileIO makes s read files through io, off the shard's thread; call it
// before the first connection. Without it files are read inline.
func (s *Server) SetFileIO(io FileIO) { s.io = io }

// load resolves path for c's request: inline without a FileIO (it returns the
// entry), else by a file job that c waits for (it returns nil). Connections
// asking for the same path meanwhile join the job. whole reads a file too
// large for the cache whole all the same (for a handler, File), up to
// maxWholeFile; such jobs are not joined. While the FileIO is Full it
// returns nil with c.shedIO set: c is answered 503.
func (s *Server) load(c *Conn, path []byte, whole bool) *cacheEntry {
	if j := s.loading[string(path)]; j != nil && !whole {
		j.waiters = append(j.waiters, waiter{c, c.gen})
		c.wait = j
		return nil
	}
	if s.io != nil && s.io.Full() {
		s.stats.FileShed++
		c.shedIO = true
		return nil
	}
	j := &FileJob{srv: s, epoch: s.epoch, key: string(path), whole: whole}
	s.stats.FileJobs++
	if s.io == nil {
		j.Run()
		s.cache.add(j.entry)
		return j.entry
	}
	j.waiters = append(j.waiters, waiter{c, c.gen})
	c.wait = j
	if !whole {
		s.loading[j.key] = j
	}
	s.io.Submit(j)
	return nil
}

// Complete takes back a job its FileIO has run, on the shard: the resolved
// path goes into the cache and the connections waiting for it are served; a
// chunk goes out on its connection; a handler's job runs the handler
// again. Each connection with new output is
// woken (Conn.SetWaker). A job whose connection has gone meanwhile is
// dropped.
func (s *Server) Complete(j *FileJob, now time.Time) {
	if j.file != nil {
		c := j.c
		if c.gen != j.gen || c.st == nil || &c.st.job != j {
			s.dropFile(j) // its stream is gone
			return
		}
		c.now = now
		c.chunkLanded(j)
		c.readChunk()
		c.afterIO()
		return
	}
	if j.work != nil {
		w := j.waiters[0]
		j.waiters[0] = waiter{}
		if w.c.gen == w.gen && w.c.wait == j {
			w.c.now = now
			w.c.resume(nil, j.work)
		}
		return
	}
	if s.loading[j.key] == j {
		delete(s.loading, j.key)
	}
	if j.epoch == s.epoch {
		s.cache.add(j.entry)
	}
	for i, w := range j.waiters {
		j.waiters[i] = waiter{}
		if w.c.gen == w.gen && w.c.wait == j {
			w.c.now = now
			w.c.resume(j.entry, nil)
		}
	}
}

// Drop takes back a job its FileIO will not complete, as it closes (the
// stack has released every connection): a stream's file is closed.
func (s *Server) Drop(j *FileJob) {
	if j.file != nil {
		s.dropFile(j)
	}
}

// read reads chunk job j: on the shard without a FileIO, or when the page
// cache holds the chunk (readCached), else by the FileIO. It reports
// whether j has landed (chunkLanded is due).
func (s *Server) read(j *FileJob) bool {
	if s.io == nil {
		s.stats.FileJobs++
		j.Run()
		return true
	}
	if s.readCached(j) {
		s.stats.InlineChunks++
		return true
	}
	s.stats.FileJobs++
	s.io.Submit(j)
	return false
}

// readCached reads j's chunk on the shard, from the page cache alone, when
// its stream holds the file open; it reports whether that read it whole.
// What it did read (j.n) stays, for the worker to go on from. A kernel or
// file system that cannot read without waiting is not asked again.
func (s *Server) readCached(j *FileJob) bool {
	if j.fd < 0 || s.nowait == nil {
		return false
	}
	n, err := s.nowait(j.fd, j.buf, j.off)
	switch err {
	case nil:
	case unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS:
		s.nowait = nil
		return false
	default: // EAGAIN: not cached; anything else, the worker reports
		return false
	}
	if n <= 0 {
		return false
	}
	j.n = n
	if n < len(j.buf) {
		return false
	}
	j.err = j.file.changed(j.fd)
	return true
}

// dropFile closes the file j's stream held open, on the shard, when no
// worker has it: once the stream has read its last chunk, failed, or gone.
// It frees the stream's place under SetStreamFiles's bound.
func (s *Server) dropFile(j *FileJob) {
	if !j.keep {
		return
	}
	if j.fd >= 0 {
		unix.Close(j.fd)
		j.fd = -1
	}
	j.keep = false
	s.stats.OpenFiles--
}

// takeChunk lends a stream chunk buffer to a connection.
func (s *Server) takeChunk() []byte {
	if n := len(s.chunks); n > 0 {
		b := s.chunks[n-1]
		s.chunks[n-1] = nil
		s.chunks = s.chunks[:n-1]
		return b
	}
	return make([]byte, chunkSize)
}

// Site returns the site s serves.
func (s *Server) Site() *Site { return s.site }

// Tick refreshes the Date header (call at least once a second) and flushes the
// access-log buffer. Flushing more often keeps the buffer small.
func (s *Server) Tick(now time.Time) {
	s.refreshDate(now)
	if s.cache != nil {
		if e := s.site.epoch.Load(); e != s.epoch {
			s.epoch = e
			s.cache.clear()
		}
	}
	if s.log != nil && len(s.logBuf) > 0 {
		if _, err := s.log.Write(s.logBuf); err != nil {
			s.stats.LogDropped++
		}
		s.logBuf = s.logBuf[:0]
	}
}

func (s *Server) refreshDate(now time.Time) {
	if s.date == nil || s.date.sec != now.Unix() {
		s.date = newDateBlock(now)
	}
}

// Stats returns this shard's counters (merged across shards by the caller).
func (s *Server) Stats() Stats { return s.stats }

// NewConn takes a connection from the shard's pool.
func (s *Server) NewConn(remote netip.AddrPort, now time.Time) *Conn {
	if s.date == nil {
		s.refreshDate(now)
	}
	var c *Conn
	if n := len(s.pool); n > 0 {
		c = s.pool[n-1]
		s.pool[n-1] = nil
		s.pool = s.pool[:n-1]
	} else {
		c = &Conn{}
	}
	c.init(s, netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port()), now)
	return c
}

// takeExchange lends an exchange to a connection that has input coming.
func (s *Server) takeExchange() *exchange {
	if n := len(s.xs); n > 0 {
		x := s.xs[n-1]
		s.xs[n-1] = nil
		s.xs = s.xs[:n-1]
		return x
	}
	return &exchange{h: head{contentLength: -1}, out: make([][]byte, 0, 16), outAr: make([]int8, 0, 16)}
}

// giveExchange takes back an exchange whose connection went idle: no
// buffer or pending slice is left in it. It keeps its scratch buffers. The
// pool holds at most as many as were ever lent at once, so a load that
// keeps that many busy allocates none.
func (s *Server) giveExchange(x *exchange) {
	clear(x.out)
	rw := ResponseWriter{hdr: x.rw.hdr[:0], body: x.rw.body[:0]}
	if cap(rw.body) > 4*arenaLimit {
		rw.body = nil
	}
	*x = exchange{h: head{contentLength: -1}, path: x.path[:0], out: x.out[:0], outAr: x.outAr[:0], rw: rw}
	s.xs = append(s.xs, x)
}

// takeIn lends an input buffer to a connection that has bytes coming; its
// charge (Memory) comes with it.
func (s *Server) takeIn() []byte {
	if b, ok := pop(&s.ins); ok {
		return b
	}
	if s.mem != nil {
		s.mem.Take(inInitial)
	}
	return make([]byte, inInitial)
}

// takeArena lends an output arena to a connection with a response to write;
// its charge comes with it.
func (s *Server) takeArena() []byte {
	if b, ok := pop(&s.arenas); ok {
		return b
	}
	if s.mem != nil {
		s.mem.Take(arenaInitial)
	}
	return make([]byte, 0, arenaInitial)
}

// pop takes the last buffer off a free list, clearing its slot.
func pop(list *[][]byte) ([]byte, bool) {
	n := len(*list)
	if n == 0 {
		return nil, false
	}
	b := (*list)[n-1]
	(*list)[n-1] = nil
	*list = (*list)[:n-1]
	return b, true
}

// Release returns c to the pool; c must not be used afterwards, and no slice
// from its Output may be used either (its buffers are reused).
func (s *Server) Release(c *Conn) {
	if c.srv != s {
		return // double release or a foreign conn: ignore rather than corrupt the pool
	}
	c.reset()
	if len(s.pool) < maxPool {
		s.pool = append(s.pool, c)
	}
}
