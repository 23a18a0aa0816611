package httpd

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/internal/testutil"
)

// streamFile is the streamed file of the tests below: nine chunks, the last
// one short.
const (
	streamName = "/d0/f0000.bin"
	streamSize = 8*chunkSize + 12345
)

// streamFixture is a Server whose files are too large for its cache, with a
// queueIO the test runs by hand.
func streamFixture(t *testing.T) (*fixture, *queueIO, [32]byte) {
	t.Helper()
	dir, sums := bigTree(t, 1, streamSize)
	f := newFixture(t, Config{Docroot: dir, CacheSize: 256 << 10}, nil)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	return f, q, sums[streamName]
}

// download asks c for the stream file and reads the response as a slow
// reader would, step bytes at a time, running file jobs as they come, until
// nothing is left; it checks that the stream never runs ahead of the reader.
func download(t *testing.T, f *fixture, q *queueIO, c *Conn, step int) []byte {
	t.Helper()
	c.Feed([]byte("GET "+streamName+" HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	var out []byte
	for steps := 0; len(q.jobs) > 0 || c.Pending() > 0; steps++ {
		if steps > 100000 {
			t.Fatal("stream stalled")
		}
		q.run(f.srv, f.now, false)
		if p := c.Pending(); p > 2*chunkSize+4096 {
			t.Fatalf("%d bytes queued: the stream ran ahead of the reader", p)
		}
		if o := c.Output(); len(o) > 0 {
			k := min(len(o[0]), step)
			out = append(out, o[0][:k]...)
			c.Advance(k)
		}
	}
	return out
}

// body checks that out is one 200 response and returns its body's sum.
func body(t *testing.T, out []byte) [32]byte {
	t.Helper()
	rs := readResponses(t, string(out))
	if len(rs) != 1 || rs[0].status != 200 || len(rs[0].body) != streamSize {
		t.Fatalf("%d responses; first %d, %d bytes", len(rs), rs[0].status, len(rs[0].body))
	}
	return sha256.Sum256([]byte(rs[0].body))
}

// openFDs counts the process's descriptors that refer to the stream file.
func openFDs(t *testing.T) int {
	t.Helper()
	return testutil.OpenFilesNamed(t, filepath.Base(streamName))
}

// TestStreamReadsCachedChunksInline: once the first chunk's job has opened
// the file, the chunks the page cache holds (all of them: the file was just
// written) are read on the shard, with no file job, byte-exact.
func TestStreamReadsCachedChunksInline(t *testing.T) {
	f, q, sum := streamFixture(t)
	if body(t, download(t, f, q, f.c, 100000)) != sum {
		t.Fatal("body differs from the file")
	}
	st := f.srv.Stats()
	if f.srv.nowait == nil {
		t.Skip("the file system cannot read without waiting (preadv2 RWF_NOWAIT)")
	}
	if st.InlineChunks != 8 || st.FileJobs != 2 || st.OpenFiles != 0 {
		t.Errorf("%d chunks inline, %d file jobs, %d files open; want 8, 2 (the path, the first chunk), 0",
			st.InlineChunks, st.FileJobs, st.OpenFiles)
	}
}

// TestStreamUncachedChunksGoToWorker: a chunk the page cache lacks (EAGAIN)
// or holds only in part (a short read) is read, or finished, by a worker.
func TestStreamUncachedChunksGoToWorker(t *testing.T) {
	f, q, sum := streamFixture(t)
	calls, short, missed := 0, 0, 0
	f.srv.nowait = func(fd int, b []byte, off int64) (int, error) {
		calls++
		switch calls % 3 {
		case 1:
			missed++
			return 0, unix.EAGAIN
		case 2:
			short++
			return unix.Pread(fd, b[:len(b)/3+1], off)
		}
		return unix.Pread(fd, b, off)
	}
	if body(t, download(t, f, q, f.c, 100000)) != sum {
		t.Fatal("body differs from the file")
	}
	st := f.srv.Stats()
	if calls != 8 || st.InlineChunks != uint64(calls-short-missed) || st.FileJobs != uint64(2+short+missed) {
		t.Errorf("%d reads tried (%d short, %d missed): %d chunks inline, %d file jobs", calls, short, missed, st.InlineChunks, st.FileJobs)
	}
}

// TestStreamNowaitUnsupported: a kernel or file system that cannot read
// without waiting is asked once; the workers read every chunk after that.
func TestStreamNowaitUnsupported(t *testing.T) {
	f, q, sum := streamFixture(t)
	calls := 0
	f.srv.nowait = func(int, []byte, int64) (int, error) {
		calls++
		return 0, unix.EOPNOTSUPP
	}
	if body(t, download(t, f, q, f.c, 100000)) != sum {
		t.Fatal("body differs from the file")
	}
	if st := f.srv.Stats(); calls != 1 || f.srv.nowait != nil || st.InlineChunks != 0 || st.FileJobs != 10 {
		t.Errorf("%d reads tried, %d chunks inline, %d file jobs; want 1, 0, 10", calls, st.InlineChunks, st.FileJobs)
	}
}

// TestStreamChangedInline: a file modified while it streams, seen by the
// shard's fstat of the open file, cuts the response short and closes the
// connection, with no worker involved.
func TestStreamChangedInline(t *testing.T) {
	f, q, _ := streamFixture(t)
	if f.srv.nowait == nil {
		t.Skip("no inline reads")
	}
	f.c.Feed([]byte("GET "+streamName+" HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	q.run(f.srv, f.now, false) // the path, the first chunk, the second inline
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(f.site.cfg.Docroot, streamName), later, later); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for range 100 {
		for _, s := range f.c.Output() {
			out = append(out, s...)
		}
		f.c.Advance(f.c.Pending())
		q.run(f.srv, f.now, false)
	}
	st := f.srv.Stats()
	if !f.c.Closing() || st.StreamAborts != 1 || st.FileJobs != 2 || st.OpenFiles != 0 {
		t.Errorf("closing %v, %d aborts, %d file jobs, %d files open; want true, 1, 2, 0",
			f.c.Closing(), st.StreamAborts, st.FileJobs, st.OpenFiles)
	}
	if n := len(out); n >= streamSize || n < 2*chunkSize {
		t.Errorf("%d bytes sent of a %d-byte file", n, streamSize)
	}
}

// TestStreamClosesFiles: the file a stream holds open is closed once, on
// the shard, however the stream ends: done, timed out or reset, with a chunk
// in flight or not, its job landing stale or dropped by a FileIO that closes;
// and a reused connection streams meanwhile.
func TestStreamClosesFiles(t *testing.T) {
	// started begins a download on c and runs jobs until the file is open
	// and the stream waits for the reader; with uncached set, the next
	// chunk is then a job in flight.
	started := func(t *testing.T, f *fixture, q *queueIO, c *Conn, uncached bool) {
		c.Feed([]byte("GET "+streamName+" HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
		q.run(f.srv, f.now, false)
		if uncached {
			f.srv.nowait = func(int, []byte, int64) (int, error) { return 0, unix.EAGAIN }
			c.Advance(c.Pending()) // the reader takes both chunks: the next is read
		}
		if f.srv.Stats().OpenFiles != 1 {
			t.Fatalf("%d files open mid-stream, want 1", f.srv.Stats().OpenFiles)
		}
	}
	expire := func(t *testing.T, f *fixture, c *Conn) {
		// A first check may find the reader active; an hour on it is idle.
		if !c.Expire(f.now.Add(time.Hour)) && !c.Expire(f.now.Add(2*time.Hour)) {
			t.Fatal("the stalled stream did not time out")
		}
	}
	for _, tc := range []struct {
		name string
		held int // files a job in flight holds once the stream ended
		end  func(t *testing.T, f *fixture, q *queueIO)
	}{
		{"done", 0, func(t *testing.T, f *fixture, q *queueIO) {
			download(t, f, q, f.c, 1<<20)
		}},
		{"timeout", 0, func(t *testing.T, f *fixture, q *queueIO) {
			started(t, f, q, f.c, false)
			expire(t, f, f.c)
		}},
		{"timeout with a chunk in flight", 1, func(t *testing.T, f *fixture, q *queueIO) {
			started(t, f, q, f.c, true)
			expire(t, f, f.c)
		}},
		{"reset", 0, func(t *testing.T, f *fixture, q *queueIO) {
			started(t, f, q, f.c, false)
			f.srv.Release(f.c)
		}},
		{"reset with a chunk in flight", 1, func(t *testing.T, f *fixture, q *queueIO) {
			started(t, f, q, f.c, true)
			f.srv.Release(f.c)
		}},
		{"reset with the first chunk in flight", 0, func(t *testing.T, f *fixture, q *queueIO) {
			f.c.Feed([]byte("GET "+streamName+" HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
			j := q.jobs[0] // the path's; the first chunk's job follows, not run
			q.jobs = q.jobs[1:]
			j.Run()
			f.srv.Complete(j, f.now)
			f.srv.Release(f.c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, q, sum := streamFixture(t)
			before := openFDs(t)
			tc.end(t, f, q)
			if n := openFDs(t) - before; n != tc.held {
				t.Fatalf("%d files open once the stream ended, want %d", n, tc.held)
			}
			// A connection, from the pool when reset, streams while the
			// old job lands.
			c := f.srv.NewConn(testRemote, f.now)
			f.srv.nowait = readNowait
			if body(t, download(t, f, q, c, 1<<20)) != sum {
				t.Fatal("body differs from the file")
			}
			if n, open := openFDs(t)-before, f.srv.Stats().OpenFiles; n != 0 || open != 0 {
				t.Errorf("%d files left open, %d counted", n, open)
			}
		})
	}
	t.Run("FileIO closing", func(t *testing.T) {
		f, q, _ := streamFixture(t)
		before := openFDs(t)
		started(t, f, q, f.c, false)
		c := f.srv.NewConn(testRemote, f.now)
		c.Feed([]byte("GET "+streamName+" HTTP/1.1\r\nHost: x\r\n\r\n"), f.now) // a first chunk's job, never run
		f.srv.nowait = func(int, []byte, int64) (int, error) { return 0, unix.EAGAIN }
		f.c.Advance(f.c.Pending()) // a chunk's job, run and not completed
		if len(q.jobs) != 2 {
			t.Fatalf("%d jobs, want 2", len(q.jobs))
		}
		q.jobs[1].Run()
		f.srv.Release(f.c)
		f.srv.Release(c)
		if n := openFDs(t) - before; n != 1 {
			t.Fatalf("%d files open with the jobs in flight, want 1", n)
		}
		for _, j := range q.jobs {
			f.srv.Drop(j)
		}
		if n, open := openFDs(t)-before, f.srv.Stats().OpenFiles; n != 0 || open != 0 {
			t.Errorf("%d files left open, %d counted", n, open)
		}
	})
}

// TestStreamOpenFilesBound: past SetStreamFiles's bound a stream opens its
// file for every chunk, on a worker, as it did before streams held them.
func TestStreamOpenFilesBound(t *testing.T) {
	f, q, sum := streamFixture(t)
	const bound = 3
	f.srv.SetStreamFiles(bound)
	f.srv.stats.OpenFiles = bound - 1 // as many other streams
	first := f.srv.NewConn(testRemote, f.now)
	first.Feed([]byte("GET "+streamName+" HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	q.run(f.srv, f.now, false) // the last place: the file stays open
	jobs := f.srv.Stats().FileJobs
	before := openFDs(t)
	if body(t, download(t, f, q, f.c, 1<<20)) != sum {
		t.Fatal("body differs from the file")
	}
	st := f.srv.Stats()
	if st.FileJobs-jobs != 9 || st.OpenFiles != bound || openFDs(t) != before {
		t.Errorf("%d file jobs for 9 chunks, %d files open (want %d), %d fds more",
			st.FileJobs-jobs, st.OpenFiles, bound, openFDs(t)-before)
	}
	f.srv.Release(first)
	if st := f.srv.Stats(); st.OpenFiles != bound-1 {
		t.Errorf("%d files open after the first stream went, want %d", st.OpenFiles, bound-1)
	}
}

// TestStreamZeroAllocs: a stream whose chunks the page cache holds
// allocates nothing on the shard; what a response allocates is its first
// chunk's job opening the file (the path, for the system call).
func TestStreamZeroAllocs(t *testing.T) {
	f, q, _ := streamFixture(t)
	req := []byte("GET " + streamName + " HTTP/1.1\r\nHost: x\r\n\r\n")
	run := func() {
		f.c.Feed(req, f.now)
		for len(q.jobs) > 0 || f.c.Pending() > 0 {
			for len(q.jobs) > 0 {
				j := q.jobs[0]
				q.jobs = q.jobs[:copy(q.jobs, q.jobs[1:])]
				j.Run()
				f.srv.Complete(j, f.now)
			}
			f.c.Advance(f.c.Pending())
		}
	}
	run()
	if f.srv.nowait == nil {
		t.Skip("no inline reads")
	}
	open := testing.AllocsPerRun(20, func() {
		fd, _ := f.site.open(streamName[1:])
		unix.Close(fd)
	})
	inline := f.srv.Stats().InlineChunks
	if n := testing.AllocsPerRun(20, run); n != open {
		t.Errorf("%v allocs per streamed response, want %v (one open)", n, open)
	}
	t.Logf("%v allocs per streamed response, all the open's", open)
	if f.srv.Stats().InlineChunks-inline != 21*8 {
		t.Errorf("%d chunks read inline in 21 responses, want 8 each", f.srv.Stats().InlineChunks-inline)
	}
}

// TestReadNowait: the kernel's side of inline reads. A file evicted from
// the page cache is not read (EAGAIN), never waited for; once read, it is.
func TestReadNowait(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i * 13 >> 4)
	}
	if err := os.WriteFile(name, want, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	b := make([]byte, len(want))
	if _, err := readNowait(fd, b, 0); err == unix.EOPNOTSUPP || err == unix.EINVAL || err == unix.ENOSYS {
		t.Skipf("the file system cannot read without waiting: %v", err)
	}
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if n, err := readNowait(fd, b, 0); err != unix.EAGAIN {
		t.Errorf("evicted file: %d bytes, %v; want EAGAIN", n, err)
	}
	if _, err := preadFull(fd, b, 0); err != nil {
		t.Fatal(err)
	}
	clear(b)
	if n, err := readNowait(fd, b, 0); n != len(want) || err != nil || string(b) != string(want) {
		t.Errorf("cached file: %d of %d bytes, %v", n, len(want), err)
	}
}
