package server

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDocrootLargerThanCacheOverTheWire serves a docroot about fifty times
// --cache-size through the shards' file readers, from several clients at
// once, and checks every body by sha256; a few files are large enough to
// stream from disk.
func TestDocrootLargerThanCacheOverTheWire(t *testing.T) {
	const files = 400
	rng := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	sums := make([][32]byte, files)
	total := 0
	for i := range files {
		size := 1 + rng.IntN(64<<10)
		if i%100 == 0 {
			size = 2<<20 + i // streamed
		}
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%10))
		must(t, os.MkdirAll(sub, 0o755))
		must(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.bin", i)), b, 0o644))
		sums[i] = sha256.Sum256(b)
		total += size
	}
	ts := startTestServer(t, func(o *Options) {
		o.Docroot = dir
		o.CacheSize = 512 << 10
	})
	t.Logf("docroot %d bytes, cache %d", total, 512<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 20 * time.Second}
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 150 {
				i := r.IntN(files)
				if r.IntN(2) == 0 {
					i = r.IntN(20) // a hot set
				}
				resp, err := c.Get(fmt.Sprintf("%s/d%d/f%d.bin", ts.base, i%10, i))
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || sha256.Sum256(body) != sums[i] {
					errs <- fmt.Errorf("f%d: status %d, %d bytes, %v: sha256 differs", i, resp.StatusCode, len(body), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ts.counter("http.cache_evictions") == 0 || ts.counter("http.cache_hits") == 0 || ts.counter("http.file_jobs") == 0 {
		t.Errorf("hits %d, evictions %d, file jobs %d", ts.counter("http.cache_hits"),
			ts.counter("http.cache_evictions"), ts.counter("http.file_jobs"))
	}
}

func TestParseCacheSize(t *testing.T) {
	for in, want := range map[string]int64{"1G": 1 << 30, "300m": 300 << 20, "65536": 64 << 10, "512K": 512 << 10} {
		o, err := ParseFlags([]string{"--cache-size", in}, nil)
		if err != nil || o.CacheSize != want {
			t.Errorf("--cache-size %s: %d, %v; want %d", in, o.CacheSize, err, want)
		}
	}
	if o, _ := ParseFlags(nil, nil); o.CacheSize != DefaultCacheSize {
		t.Errorf("default %d", o.CacheSize)
	}
	for _, in := range []string{"10", "x", "-1M", "", "1T"} {
		if _, err := ParseFlags([]string{"--cache-size", in}, nil); err == nil {
			t.Errorf("--cache-size %q: no error", in)
		}
	}
}

// TestReloadOnHUP: after SIGHUP a file changed on disk is served (within the
// shards' next Tick); before it the cached copy is.
func TestReloadOnHUP(t *testing.T) {
	ts := startTestServer(t, func(o *Options) { o.SMP = 1 }) // one cache, so "before" is certain
	get := func() string {
		resp, err := http.Get(ts.base + "/f1.txt")
		must(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		must(t, err)
		return string(b)
	}
	if b := get(); b != "file 1\n" {
		t.Fatalf("%q", b)
	}
	must(t, os.WriteFile(filepath.Join(ts.dir, "www", "f1.txt"), []byte("changed\n"), 0o644))
	if b := get(); b != "file 1\n" {
		t.Fatalf("before SIGHUP: %q", b)
	}
	sig := make(chan os.Signal, 1)
	said := make(chan struct{}, 1)
	stops := ts.ReloadOnHUP(sig, func() { said <- struct{}{} })
	sig <- syscall.SIGHUP
	<-said
	for deadline := time.Now().Add(5 * time.Second); get() != "changed\n"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("changed file not served after SIGHUP")
		}
	}
	sig <- syscall.SIGTERM
	if v := <-stops; v != syscall.SIGTERM {
		t.Fatalf("passed on %v", v)
	}
}

// pipelinedMisses writes many pipelined GETs of uncached files (and of
// large, streamed ones) in one go and checks the responses come back whole
// and in order, on either stack.
func pipelinedMisses(t *testing.T, c net.Conn, br *bufio.Reader, names []string, sums map[string][32]byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var req strings.Builder
	for _, n := range names {
		req.WriteString("GET /" + n + " HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	go c.Write([]byte(req.String()))
	for i, n := range names {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || sha256.Sum256(body) != sums[n] {
			t.Fatalf("response %d (%s): %d, %d bytes, %v: not the file", i, n, resp.StatusCode, len(body), err)
		}
	}
}

// missTree writes n files, every tenth 1 MiB (streamed with a 256K cache),
// and returns the docroot, the names in a shuffled order with repeats, and
// the sums.
func missTree(t *testing.T, n int) (string, []string, map[string][32]byte) {
	rng := rand.New(rand.NewPCG(8, 9))
	dir := t.TempDir()
	sums := map[string][32]byte{}
	var names []string
	for i := range n {
		size := 1 + rng.IntN(8<<10)
		if i%10 == 0 {
			size = 1<<20 + i
		}
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("p%d.bin", i)
		must(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		sums[name] = sha256.Sum256(b)
		names = append(names, name, name)
	}
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	return dir, names, sums
}

func TestPipelinedMissesPosix(t *testing.T) {
	dir, names, sums := missTree(t, 60)
	ts := startTestServer(t, func(o *Options) {
		o.Docroot = dir
		o.CacheSize = 256 << 10
	})
	c, br := ts.dial(t)
	defer c.Close()
	pipelinedMisses(t, c, br, names, sums)
}

func TestPipelinedMissesNative(t *testing.T) {
	dir, names, sums := missTree(t, 60)
	nt := startNativeTest(t, 1, nil, "", func(o *Options) {
		o.Docroot = dir
		o.CacheSize = 256 << 10
	})
	c, br := nt.raw(nt.Addr.String())
	defer c.Close()
	pipelinedMisses(t, c, br, names, sums)
}
