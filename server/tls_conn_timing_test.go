package server

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkTLSResponse measures what a static response costs the posix
// stack's record layer: httpd answers a keep-alive request from its file
// cache, the response is sealed and written to a socket (a socketpair,
// read out by the benchmark). "queued" copies every record into the
// ciphertext buffer and writes that; "direct" sends the last record of
// each batch from crypto/tls's buffer with the buffer, as the stack does.
// queued-B/op is the ciphertext copied into the queue per response. The
// variants run interleaved under -count; compare the medians of cpu-ns/op,
// the benchmark thread's CPU time (wall time on a busy machine counts other
// processes too).
func BenchmarkTLSResponse(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 64 << 10, 256 << 10} {
		for _, direct := range []bool{false, true} {
			name := "queued"
			if direct {
				name = "direct"
			}
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, name), func(b *testing.B) {
				benchTLSResponse(b, size, direct)
			})
		}
	}
}

func benchTLSResponse(b *testing.B, size int, direct bool) {
	m := newMemTLS(b, tls.VersionTLS13)
	hc := memHTTP(b, map[string][]byte{"f.bin": bytes.Repeat([]byte{'x'}, size)})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	c := &posixConn{p: &Posix{iov: make([]unix.Iovec, maxIov)}, fd: fds[0], hc: hc, tls: m.t}
	if direct {
		m.t.sock = c
	}
	req := []byte("GET /f.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	sink := make([]byte, 1<<20)
	got := 0
	serve := func() {
		hc.Feed(req, time.Now())
		c.flushTLS()
		if c.broken || c.pending() > 0 {
			b.Fatalf("broken %v, %d bytes not written", c.broken, c.pending())
		}
		got = 0
		for {
			n, err := read(fds[1], sink)
			if err != nil {
				break
			}
			got += n
		}
	}
	serve()
	want := got
	b.SetBytes(int64(size))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, q0 := threadCPU(), m.s.report().QueuedBytes
	b.ResetTimer()
	for range b.N {
		serve()
		if got != want {
			b.Fatalf("%d bytes of ciphertext, want %d", got, want)
		}
	}
	b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(m.s.report().QueuedBytes-q0)/float64(b.N), "queued-B/op")
	b.ReportMetric(float64(want), "ciphertext-B/op")
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
