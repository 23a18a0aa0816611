package server

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/netstack"
)

// BenchmarkNativeConnMemory measures what one connection costs the server
// in Go memory, for the whole connection: TCP state, the glue's and
// httpd's state, their buffers. It holds b.N connections (at least 1000,
// at most 16000: kernel sockets of the client namespace, one descriptor
// each) open to a one-shard native server, then sends on each the first
// line of a request (in flight: httpd holds it until the header ends).
// The table slots and timer heap TCP reserves for --max-connections are
// measured apart, on a stack with TCP alone. The UMEM is per queue, not per
// connection (see native.SizeFor). Reports:
//
//	B/conn-idle      heap per open connection, idle
//	B/conn-inflight  heap per connection with a request in flight
//	B/conn-reserved  heap TCP reserves per connection of MaxConns
//	B/conn-rss       the process's resident memory per open connection, idle
//	                 (the heap with the runtime's overhead on it)
//
//	go test ./server -run '^$' -bench NativeConnMemory -benchtime 10000x
func BenchmarkNativeConnMemory(b *testing.B) {
	n := min(max(b.N, 1000), 16000)
	nt := startNativeTest(b, 1, nil, "", nil)
	fds := make([]int, 0, n)
	b.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	waitOpen := func(want uint64) {
		for deadline := time.Now().Add(30 * time.Second); nt.total("native.open") != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d connections open on the server, want %d", nt.total("native.open"), want)
			}
		}
	}
	before, rss0 := heap(), rss(b)
	inClientNS(b, nt, func() {
		for range n {
			fd, err := dialRaw(nt.Addr)
			if err != nil {
				b.Fatalf("connection %d: %v", len(fds), err)
			}
			fds = append(fds, fd)
		}
	})
	waitOpen(uint64(n))
	idle, rss1 := heap(), rss(b)
	segs := nt.total("tcp.in_segs")
	line := []byte("GET /f1.txt HTTP/1.1\r\nHost: x\r\n") // no blank line: the request stays in flight
	for _, fd := range fds {
		if _, err := unix.Write(fd, line); err != nil {
			b.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); nt.total("tcp.in_segs")-segs < uint64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the server took %d segments of %d", nt.total("tcp.in_segs")-segs, n)
		}
	}
	busy := heap()
	b.ReportMetric(float64(idle-before)/float64(n), "B/conn-idle")
	b.ReportMetric(float64(busy-before)/float64(n), "B/conn-inflight")
	b.ReportMetric(reservedPerConn(b, 1<<16), "B/conn-reserved")
	b.ReportMetric((float64(rss1)-float64(rss0))/float64(n), "B/conn-rss")
	b.Logf("%d connections: heap %d -> %d idle -> %d in flight", n, before, idle, busy)
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rss is the process's resident memory in bytes (/proc/self/statm), after
// the runtime gave back what it holds free, so that pages earlier runs
// left do not count.
func rss(b *testing.B) uint64 {
	debug.FreeOSMemory()
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Fatal(err)
	}
	var size, resident uint64
	if _, err := fmt.Sscan(string(statm), &size, &resident); err != nil {
		b.Fatalf("/proc/self/statm: %v", err)
	}
	return resident * uint64(os.Getpagesize())
}

// reservedPerConn is the heap a stack's TCP takes at EnableTCP for
// maxConns connections, per connection.
func reservedPerConn(b *testing.B, maxConns int) float64 {
	s, err := netstack.NewStack(netstack.Config{MAC: netstack.MAC{2, 0, 0, 0, 0, 1}, Addr: netstack.IPv4Addr{198, 18, 0, 1}, Netmask: netstack.IPv4Addr{255, 255, 255, 0}})
	if err != nil {
		b.Fatal(err)
	}
	h0 := heap()
	s.EnableTCP(netstack.TCPConfig{MaxConns: maxConns})
	h1 := heap()
	runtime.KeepAlive(s)
	return float64(h1-h0) / float64(maxConns)
}

// inClientNS runs fn on a thread in the lab's client namespace.
func inClientNS(b *testing.B, nt *nativeTest, fn func()) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := nt.Lab.ClientNS.Enter(); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// dialRaw is a blocking kernel TCP connect to a, as a bare descriptor (no
// Go heap beyond the int).
func dialRaw(a netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %v: %w", a, err)
	}
	return fd, nil
}
