package httpd

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"percore/internal/testutil"
)

// queueIO is a FileIO that holds jobs until the test runs them, in any
// order, and is full with limit jobs (0: never).
type queueIO struct {
	jobs  []*FileJob
	limit int
}

func (q *queueIO) Submit(j *FileJob) { q.jobs = append(q.jobs, j) }
func (q *queueIO) Full() bool        { return q.limit > 0 && len(q.jobs) >= q.limit }

// run runs and completes the queued jobs, last first when reverse is set,
// until none is left.
func (q *queueIO) run(srv *Server, now time.Time, reverse bool) int {
	n := 0
	for len(q.jobs) > 0 {
		var j *FileJob
		if reverse {
			j, q.jobs = q.jobs[len(q.jobs)-1], q.jobs[:len(q.jobs)-1]
		} else {
			j, q.jobs = q.jobs[0], q.jobs[1:]
		}
		j.Run()
		srv.Complete(j, now)
		n++
	}
	return n
}

func TestS3FIFOKeepsHotFilesThroughAScan(t *testing.T) {
	var st Stats
	fc := newFileCache(100*(entryOverhead+8), &st)
	entry := func(i int) *cacheEntry { return newEntry(fmt.Sprintf("/f%06d", i), entMissing, nil) }
	hot := 20
	for round := range 3 { // the hot files, each asked for a few times
		for i := range hot {
			if fc.get([]byte(entry(i).key)) == nil {
				fc.add(entry(i))
			}
			_ = round
		}
	}
	for i := hot; i < 5000; i++ { // a scan of one-hit wonders
		fc.add(entry(i))
		if fc.used > fc.max {
			t.Fatalf("used %d over max %d", fc.used, fc.max)
		}
		if i%50 == 0 { // the hot set keeps being asked for
			for k := range hot {
				if fc.get([]byte(entry(k).key)) == nil {
					fc.add(entry(k))
				}
			}
		}
	}
	kept := 0
	for i := range hot {
		if fc.m[entry(i).key] != nil {
			kept++
		}
	}
	if kept < hot*9/10 {
		t.Errorf("%d of %d hot entries survived the scan", kept, hot)
	}
	if st.CacheEvictions == 0 || len(fc.m) > 100 {
		t.Errorf("evictions %d, entries %d", st.CacheEvictions, len(fc.m))
	}
	fc.clear()
	if len(fc.m) != 0 || fc.used != 0 {
		t.Error("clear left entries")
	}
}

// TestMissWaitsInOrder: a miss holds its connection's later pipelined
// requests until the file job lands, and the responses keep request order
// whatever order the jobs finish in.
func TestMissWaitsInOrder(t *testing.T) {
	f := newTestFixture(t)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	req := "GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /dyn-free HTTP/1.1\r\nHost: x\r\n\r\n" + // 404 from the docroot: a miss too
		"GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n"
	if n := f.c.Feed([]byte(req), f.now); n != len(req) {
		t.Fatalf("fed %d of %d", n, len(req))
	}
	if f.c.Pending() != 0 || len(q.jobs) != 1 {
		t.Fatalf("before the job: %d bytes out, %d jobs", f.c.Pending(), len(q.jobs))
	}
	if n := q.run(f.srv, f.now, true); n != 3 {
		t.Fatalf("%d jobs run, want 3", n)
	}
	rs := readResponses(t, f.drain())
	want := []struct {
		status int
		body   string
	}{{200, "body{}\n"}, {404, "404 Not Found\n"}, {200, "api:/api/x"}, {200, "hello file\n"}}
	if len(rs) != len(want) {
		t.Fatalf("%d responses", len(rs))
	}
	for i, w := range want {
		if rs[i].status != w.status || rs[i].body != w.body {
			t.Errorf("response %d: %d %q, want %d %q", i, rs[i].status, rs[i].body, w.status, w.body)
		}
	}
	// Now cached: no job.
	if r := get(f, "GET", "/style.css"); r.status != 200 || len(q.jobs) != 0 {
		t.Errorf("hit: %d, %d jobs", r.status, len(q.jobs))
	}
}

// TestMissJoinsJobInFlight: connections missing on one path share one job.
func TestMissJoinsJobInFlight(t *testing.T) {
	f := newTestFixture(t)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	c2 := f.srv.NewConn(testRemote, f.now)
	req := []byte("GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	f.c.Feed(req, f.now)
	c2.Feed(req, f.now)
	if len(q.jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(q.jobs))
	}
	q.run(f.srv, f.now, false)
	for _, c := range []*Conn{f.c, c2} {
		if !strings.HasSuffix(string(outputBytes(c)), "hello file\n") {
			t.Errorf("no response: %q", outputBytes(c))
		}
	}
}

// TestConnGoneWhileWaiting: a job whose connection was released or timed out
// meanwhile is dropped, and the pooled connection's next owner is unaffected.
func TestConnGoneWhileWaiting(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t), HeaderTimeout: time.Second}, nil)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	f.c.Feed([]byte("GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	f.srv.Release(f.c)
	c := f.srv.NewConn(testRemote, f.now) // the same struct, reused
	c.Feed([]byte("GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	if !c.Expire(f.now.Add(2 * time.Second)) {
		t.Fatal("waiting connection did not time out")
	}
	c3 := f.srv.NewConn(testRemote, f.now)
	q.run(f.srv, f.now, false)
	if c.Pending() != 0 || c3.Pending() != 0 {
		t.Errorf("stale jobs gave output: %q %q", outputBytes(c), outputBytes(c3))
	}
}

func outputBytes(c *Conn) []byte {
	var b []byte
	for _, s := range c.Output() {
		b = append(b, s...)
	}
	return b
}

// bigTree writes n files of random sizes (one of them size big) and returns
// the docroot and each file's sha256.
func bigTree(t *testing.T, n, big int) (string, map[string][32]byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	tree := map[string][]byte{}
	sums := map[string][32]byte{}
	for i := range n {
		size := 1 + rng.IntN(40<<10)
		if i == 0 {
			size = big
		}
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("d%d/f%04d.bin", i%7, i)
		tree[name] = b
		sums["/"+name] = sha256.Sum256(b)
	}
	return testutil.WriteTree(t, tree), sums
}

// TestDocrootLargerThanCache serves a docroot many times the cache's size,
// with file jobs landing in random order, and checks every byte.
func TestDocrootLargerThanCache(t *testing.T) {
	const cacheSize = 256 << 10
	dir, sums := bigTree(t, 300, 3<<20) // ~6 MB, one file 3 MiB (streamed)
	f := newFixture(t, Config{Docroot: dir, CacheSize: cacheSize}, nil)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	names := make([]string, 0, len(sums))
	for name := range sums {
		names = append(names, name)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 3 {
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for i := 0; i < len(names); i += 5 { // five pipelined requests at a time
			var req strings.Builder
			batch := names[i:min(i+5, len(names))]
			for _, name := range batch {
				req.WriteString("GET " + name + " HTTP/1.1\r\nHost: x\r\n\r\n")
			}
			var out strings.Builder
			rest := []byte(req.String())
			for len(rest) > 0 || len(q.jobs) > 0 || f.c.Pending() > 0 {
				n := f.c.Feed(rest, f.now)
				rest = rest[n:]
				q.run(f.srv, f.now, rng.IntN(2) == 0)
				out.WriteString(f.drain())
			}
			rs := readResponses(t, out.String())
			if len(rs) != len(batch) {
				t.Fatalf("round %d: %d responses for %d requests", round, len(rs), len(batch))
			}
			for k, r := range rs {
				if r.status != 200 || sha256.Sum256([]byte(r.body)) != sums[batch[k]] {
					t.Fatalf("%s: status %d, %d bytes, sha256 differs", batch[k], r.status, len(r.body))
				}
			}
		}
		if c := f.srv.cache; c.used > c.max {
			t.Fatalf("cache holds %d bytes, max %d", c.used, c.max)
		}
	}
	st := f.srv.Stats()
	if st.CacheEvictions == 0 || st.CacheHits == 0 || st.StreamAborts != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestStreamBackpressure: a streamed file is read a chunk at a time and no
// further ahead of the reader than two chunks, however slowly it reads.
func TestStreamBackpressure(t *testing.T) {
	dir, sums := bigTree(t, 1, 8*chunkSize+12345)
	f := newFixture(t, Config{Docroot: dir, CacheSize: 256 << 10}, nil)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	name := "/d0/f0000.bin"
	req := "GET " + name + " HTTP/1.1\r\nHost: x\r\n\r\nGET /d0/f0000.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n\r\n"
	f.c.Feed([]byte(req), f.now)
	var out []byte
	for steps := 0; len(q.jobs) > 0 || f.c.Pending() > 0; steps++ {
		if steps > 10000 {
			t.Fatal("stream stalled")
		}
		q.run(f.srv, f.now, false)
		if p := f.c.Pending(); p > 2*chunkSize+4096 {
			t.Fatalf("%d bytes queued: the stream ran ahead of the reader", p)
		}
		o := f.c.Output()
		if len(o) == 0 {
			continue
		}
		k := min(len(o[0]), 10000) // a slow reader
		out = append(out, o[0][:k]...)
		f.c.Advance(k)
	}
	rs := readResponses(t, string(out))
	if len(rs) != 2 || rs[0].status != 200 || sha256.Sum256([]byte(rs[0].body)) != sums[name] {
		t.Fatalf("%d responses; first %d, %d bytes", len(rs), rs[0].status, len(rs[0].body))
	}
	if st := f.srv.stats; st.FileJobs+st.InlineChunks < 9 {
		t.Errorf("%d file jobs and %d chunks read inline for a file of 8 chunks and a bit", st.FileJobs, st.InlineChunks)
	}
}

// TestStreamFileChanged: a streamed file that changes while it is sent cuts
// the response short and closes the connection.
func TestStreamFileChanged(t *testing.T) {
	dir, _ := bigTree(t, 1, 8*chunkSize)
	f := newFixture(t, Config{Docroot: dir, CacheSize: 256 << 10}, nil)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	f.c.Feed([]byte("GET /d0/f0000.bin HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	q.run(f.srv, f.now, false) // the lookup and the first chunks
	if err := os.WriteFile(filepath.Join(dir, "d0/f0000.bin"), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		f.drain()
		q.run(f.srv, f.now, false)
	}
	if !f.c.Closing() || f.srv.stats.StreamAborts != 1 {
		t.Errorf("closing %v, aborts %d", f.c.Closing(), f.srv.stats.StreamAborts)
	}
}

// TestReload: a changed file is served after Site.Reload and the next Tick,
// the cached one before.
func TestReload(t *testing.T) {
	dir := makeDocroot(t)
	f := newFixture(t, Config{Docroot: dir}, nil)
	if r := get(f, "GET", "/hello.txt"); r.body != "hello file\n" {
		t.Fatalf("%q", r.body)
	}
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := get(f, "GET", "/hello.txt"); r.body != "hello file\n" {
		t.Fatalf("before reload: %q", r.body)
	}
	f.site.Reload()
	f.now = f.now.Add(time.Second)
	f.srv.Tick(f.now)
	if r := get(f, "GET", "/hello.txt"); r.body != "changed\n" {
		t.Errorf("after reload: %q", r.body)
	}
	if r := get(f, "GET", "/new.txt"); r.status != 200 || r.body != "new\n" {
		t.Errorf("new file: %d %q", r.status, r.body)
	}
}

// TestHandlerFile: a handler reads docroot files through the cache; on a
// miss it returns and runs again when the file is read, a file too large
// for the cache is read whole for it, and a hit allocates nothing.
func TestHandlerFile(t *testing.T) {
	dir := makeDocroot(t)
	big, err := os.ReadFile(filepath.Join(dir, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	f := newFixture(t, Config{Docroot: dir, CacheSize: 256 << 10}, func(s *Site) {
		s.Handle("/f", func(w *ResponseWriter, r *Request) {
			runs++
			w.WriteString("partial output, discarded on a miss|")
			body, found, wait := w.File(r.Query)
			if wait {
				return
			}
			if !found {
				w.WriteHeader(404)
				return
			}
			w.Write(body[:min(len(body), 20)])
		})
	})
	q := &queueIO{}
	f.srv.SetFileIO(q)
	req := "GET /f?/hello.txt HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /f?/big.txt HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /f?/missing HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /f?/.env HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /f?/../x HTTP/1.1\r\nHost: x\r\n\r\n"
	f.c.Feed([]byte(req), f.now)
	q.run(f.srv, f.now, false)
	rs := readResponses(t, f.drain())
	p := "partial output, discarded on a miss|"
	want := []struct {
		status int
		body   string
	}{{200, p + "hello file\n"}, {200, p + string(big[:20])}, {404, p}, {404, p}, {404, p}}
	if len(rs) != len(want) {
		t.Fatalf("%d responses", len(rs))
	}
	for i, w := range want {
		if rs[i].status != w.status || rs[i].body != w.body {
			t.Errorf("response %d: %d %q, want %d %q", i, rs[i].status, rs[i].body, w.status, w.body)
		}
	}
	// hello.txt: miss, run again; big.txt: miss (streamed entry), whole read, run again.
	if runs != 2+3+2+1+1 {
		t.Errorf("handler ran %d times", runs)
	}
	hit := []byte("GET /f?/hello.txt HTTP/1.1\r\nHost: x\r\n\r\n") // big.txt is larger than the whole cache
	if n := testing.AllocsPerRun(100, func() { serveOnce(f.c, hit, f) }); n != 0 || len(q.jobs) != 0 {
		t.Errorf("%v allocs per hit, %d jobs", n, len(q.jobs))
	}
}
