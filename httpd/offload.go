package httpd

// Job is work a handler hands off the shard (ResponseWriter.Offload): Run
// may block (a system call, a child process) and runs on one of the stack's
// I/O goroutines, the ones that read files, so it must touch nothing of the
// shard. What it produced is the handler's to read once it is back.
type Job interface {
	Run()
}

// Offload hands j to the stack's I/O goroutines without blocking. The
// handler must return at once (what it wrote is discarded); it is called
// again for the same request, with the same Request, once j has run, and
// Offloaded then returns j. Requests pipelined behind it wait, in order,
// while the shard serves other connections. While the FileIO is full the
// request is answered 503 instead and j never runs. Without a FileIO (tests, tools)
// j runs inline and the handler is called again at once.
func (w *ResponseWriter) Offload(j Job) {
	c := w.c
	s := c.srv
	if s.io != nil && s.io.Full() {
		s.stats.FileShed++
		c.shedIO = true // answered 503
		return
	}
	s.stats.Offloads++
	if s.io == nil {
		j.Run()
		c.done, c.again = j, true
		return
	}
	fj := &FileJob{srv: s, work: j, waiters: []waiter{{c, c.gen}}}
	c.wait = fj
	s.io.Submit(fj)
}

// Offloaded returns the job this request's Offload handed over, once it has
// run; nil before (the handler's first call) and for other requests.
func (w *ResponseWriter) Offloaded() Job { return w.c.done }
