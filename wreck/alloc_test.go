package wreck

import (
	"testing"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// loopFixture is one kernel-mode client shard, on a shard that does not run,
// with one open connection whose peer is the other end of a socketpair, so a
// test can play the server byte for byte.
type loopFixture struct {
	s     *kclient
	c     *conn
	peer  int
	resp  []byte // pipeline responses, back to back, seq digits at seqAt[i]
	seqAt []int
	drain []byte
}

func newLoopFixture(tb testing.TB, pipeline int, checkSeq bool, rate float64) *loopFixture {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Server, cfg.Pipeline, cfg.CheckSeq, cfg.Rate = "test:1", pipeline, checkSeq, rate
	req, seqOff := buildRequest(&cfg, checkSeq)
	sh, err := shard.NewDetached(shard.Config{Tick: wheelTick})
	if err != nil {
		tb.Fatal(err)
	}
	s := newKClient(sh, newAcct(0, &cfg, 1, -1), nil, unix.AF_UNIX, req, seqOff)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	f := &loopFixture{s: s, c: &s.conns[0], peer: fds[1], drain: make([]byte, 1<<16)}
	tb.Cleanup(func() { s.closeConns(); sh.Close(); unix.Close(fds[1]) })
	f.c.fd = fds[0]
	s.now = mono()
	s.begun, s.t0 = true, s.now
	s.connected(f.c) // writes the first pipeline of requests
	one := "HTTP/1.1 200 OK\r\nServer: t\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
	for range pipeline {
		f.resp = append(f.resp, one...)
		if checkSeq {
			f.resp = append(f.resp, "X-Wreck-Seq: "...)
			f.seqAt = append(f.seqAt, len(f.resp))
			f.resp = append(f.resp, "0000000000000000\r\n"...)
		}
		f.resp = append(f.resp, "\r\nHello, World!"...)
	}
	return f
}

// round plays the server for one pipeline: it reads the requests, answers them
// all, and lets the shard parse the answers and issue the next requests.
func (f *loopFixture) round(tb testing.TB) {
	n, err := unix.Read(f.peer, f.drain)
	if err != nil || n != f.c.n*f.s.reqLen {
		tb.Fatalf("peer read %d (%v), want %d", n, err, f.c.n*f.s.reqLen)
	}
	for i, at := range f.seqAt {
		stampSeq(f.resp[at:], f.c.seqWant+uint64(i))
	}
	if _, err := unix.Write(f.peer, f.resp); err != nil {
		tb.Fatal(err)
	}
	f.s.now = mono()
	f.s.readable(f.c, false)
	f.s.runPending()
}

// The parse-and-issue loop (read, parse, validate, record latency, write the
// next requests) allocates nothing per request.
func TestLoopNoAllocs(t *testing.T) {
	for _, tc := range []struct {
		pipeline int
		seq      bool
		rate     float64 // open loop so fast that every request is due at once
	}{{1, false, 0}, {16, false, 0}, {8, true, 0}, {4, false, 1e12}} {
		f := newLoopFixture(t, tc.pipeline, tc.seq, tc.rate)
		f.round(t) // warm up
		allocs := testing.AllocsPerRun(200, func() { f.round(t) })
		if allocs != 0 {
			t.Errorf("pipeline %d seq %v: %v allocations per round, want 0", tc.pipeline, tc.seq, allocs)
		}
		want := uint64(201 * tc.pipeline) // AllocsPerRun runs once more to warm up
		if f.s.cnt.Responses != want+uint64(tc.pipeline) || f.s.cnt.failures() != 0 || f.s.cnt.Errors[errNon2xx] != 0 {
			t.Errorf("pipeline %d: %d responses, %d failures; want %d, 0", tc.pipeline, f.s.cnt.Responses, f.s.cnt.failures(), want+uint64(tc.pipeline))
		}
	}
}

func BenchmarkLoop(b *testing.B) {
	for _, pipeline := range []int{1, 16} {
		b.Run(map[int]string{1: "pipeline1", 16: "pipeline16"}[pipeline], func(b *testing.B) {
			f := newLoopFixture(b, pipeline, false, 0)
			b.ReportAllocs()
			for b.Loop() {
				f.round(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pipeline), "ns/req")
		})
	}
}
