// Package testutil holds the helpers that percore's tests share: skips that
// say why, frames built with gopacket (independently of netstack's own
// encoders), and file trees written for a test. It is imported by tests only,
// and imports no percore package, so any package's own tests may use it.
package testutil

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"golang.org/x/sys/unix"
)

// NeedRoot skips t when the process is not root, giving why root is needed
// (CI runs as root, so there the test runs).
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s", why)
	}
}

// SkipUnless skips t with reason as the explanation when reason is not nil:
// SkipUnless(t, afxdp.Supported()) for tests that open AF_XDP sockets.
func SkipUnless(t testing.TB, reason error) {
	t.Helper()
	if reason != nil {
		t.Skip(reason)
	}
}

// Must fails t at once on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Serialize builds a frame from gopacket layers with lengths and checksums
// computed (gopacket pads Ethernet frames to 60 bytes).
func Serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// WriteTree writes files (slash-separated path -> contents, directories made
// as needed) into a new temporary directory, removed after the test, and
// returns the directory.
func WriteTree(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		Must(t, os.WriteFile(p, body, 0o644))
	}
	return dir
}

// RawConn is a blocking TCP client socket to addr (IPv4) driven by plain
// syscalls, so that a request/response round trip allocates nothing on the
// client side either; reads time out after 10 s. t.Cleanup closes it.
func RawConn(t testing.TB, addr netip.AddrPort) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	Must(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.Timeval{Sec: 10}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	Must(t, unix.Connect(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}))
	return fd
}

// ServeAllocs measures the allocations per keep-alive round trip of req to
// the server at addr, in the whole process (AllocsPerRun counts every
// goroutine's, the server's shards included): the first response sets the
// length to read back, 200 round trips warm the pools, 500 are measured. It
// returns the first response too.
func ServeAllocs(t testing.TB, addr netip.AddrPort, req []byte) (allocs float64, first []byte) {
	t.Helper()
	fd := RawConn(t, addr)
	buf := make([]byte, 64<<10)
	writeAll(fd, req)
	n, err := unix.Read(fd, buf)
	for err == unix.EINTR {
		n, err = unix.Read(fd, buf)
	}
	if err != nil || n <= 0 {
		t.Fatalf("first response: %d bytes, %v", n, err)
	}
	first = append([]byte(nil), buf[:n]...)
	var failed error
	roundTrip := func() {
		if err := writeAll(fd, req); err != nil {
			failed = err
			return
		}
		for got := 0; got < len(first); {
			k, err := unix.Read(fd, buf[got:])
			if err == unix.EINTR {
				continue // a signal (the runtime's preemption) cut the wait short
			}
			if err != nil || k == 0 {
				failed = fmt.Errorf("read: %d %v", k, err)
				return
			}
			got += k
		}
	}
	for range 200 {
		roundTrip()
	}
	allocs = testing.AllocsPerRun(500, roundTrip)
	if failed != nil {
		t.Fatal(failed)
	}
	return allocs, first
}

// writeAll writes p to the blocking socket fd, again after a signal.
func writeAll(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// OpenFilesNamed counts the process's descriptors that refer to a file
// whose base name is name: a test that a server closes what it opened
// counts those, since a count of all descriptors moves with anything else
// the process opens or closes meanwhile.
func OpenFilesNamed(t testing.TB, name string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && filepath.Base(target) == name {
			n++
		}
	}
	return n
}
