package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"percore/internal/testutil"
)

// streamSize is a file streamed in sixteen chunks with a 256 KiB cache.
const streamSize = 8 << 20

// streamEnds downloads /s.bin over connections from dial, ending the stream
// each way it can end: read whole, closed by the client mid-stream, reset
// mid-stream. Once the server has closed them all, no stream holds its file
// open (http.open_files), and no descriptor of the process refers to it.
func streamEnds(t *testing.T, dial func() (net.Conn, *bufio.Reader), sum string, total func(string) uint64, open string) {
	t.Helper()
	get := func(whole bool) net.Conn {
		c, br := dial()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write([]byte("GET /s.bin HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(1 << 20)
		if whole {
			n = streamSize
		}
		h := sha256.New()
		if k, err := io.CopyN(h, resp.Body, n); err != nil {
			t.Fatalf("%d bytes of the body: %v", k, err)
		}
		if whole && hex.EncodeToString(h.Sum(nil)) != sum {
			t.Fatal("body differs from the file")
		}
		return c
	}
	for range 3 {
		get(true).Close()
		get(false).Close()
		c := get(false)
		c.(*net.TCPConn).SetLinger(0) // reset
		c.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for total(open) != 0 || total("http.open_files") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections and %d stream files still open", total(open), total("http.open_files"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := testutil.OpenFilesNamed(t, "s.bin"); n != 0 {
		t.Errorf("%d descriptors still refer to the streamed file", n)
	}
	if total("http.inline_chunks") == 0 {
		t.Error("no chunk read from the page cache on the shard")
	}
}

func TestStreamFilesClosedPosix(t *testing.T) {
	dir := t.TempDir()
	b := make([]byte, streamSize)
	for i := range b {
		b[i] = byte(i * 7 >> 3)
	}
	must(t, os.WriteFile(filepath.Join(dir, "s.bin"), b, 0o644))
	h := sha256.Sum256(b)
	ts := startTestServer(t, func(o *Options) {
		o.Docroot = dir
		o.CacheSize = 256 << 10
	})
	streamEnds(t, func() (net.Conn, *bufio.Reader) { return ts.dial(t) }, hex.EncodeToString(h[:]), ts.counter, "posix.open")
}

func TestStreamFilesClosedNative(t *testing.T) {
	nt := startNativeTest(t, 1, []docrootFile{{"s.bin", streamSize}}, "", func(o *Options) {
		o.CacheSize = 256 << 10
	})
	streamEnds(t, func() (net.Conn, *bufio.Reader) { return nt.raw(nt.Addr.String()) }, nt.sums["s.bin"], nt.total, "native.open")
}
