package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkPosixStream is one keep-alive download of a 64 MiB file too large
// for the cache, so streamed from the page cache a chunk at a time, over
// loopback through one posix shard. ctxsw/op and cpu-ms/op are the whole
// process's: the shard's, its file workers' and the client's.
func BenchmarkPosixStream(b *testing.B) {
	const size = 64 << 20
	dir := b.TempDir()
	must(b, os.WriteFile(filepath.Join(dir, "s.bin"), make([]byte, size), 0o644))
	s := startTestServer(b, func(o *Options) { o.SMP, o.Docroot, o.CacheSize = 1, dir, 256<<10 })
	c, err := net.Dial("tcp", s.Addr.String())
	must(b, err)
	defer c.Close()
	br := bufio.NewReaderSize(c, 256<<10)
	req := []byte("GET /s.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	get := func() {
		c.SetDeadline(time.Now().Add(60 * time.Second))
		_, err := c.Write(req)
		must(b, err)
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		must(b, err)
		if n, err := io.Copy(io.Discard, resp.Body); n != size || err != nil {
			b.Fatalf("%d bytes of %d: %v", n, size, err)
		}
	}
	get() // the file into the page cache
	var r0, r1 unix.Rusage
	must(b, unix.Getrusage(unix.RUSAGE_SELF, &r0))
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		get()
	}
	b.StopTimer()
	must(b, unix.Getrusage(unix.RUSAGE_SELF, &r1))
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64(r1.Nvcsw+r1.Nivcsw-r0.Nvcsw-r0.Nivcsw)/float64(b.N), "ctxsw/op")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
