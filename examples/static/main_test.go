package main

import (
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestStatic(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "index.html"), []byte("<h1>hi</h1>\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".secret"), []byte("no\n"), 0o644)
	sig := make(chan os.Signal, 1)
	addrs := make(chan netip.AddrPort, 1)
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		code <- run([]string{"--docroot", dir, "--port", "0", "--address", "127.0.0.1", "--smp", "1", "--stats-interval", "0"},
			&stderr, sig, func(a netip.AddrPort) { addrs <- a })
	}()
	var addr netip.AddrPort
	select {
	case addr = <-addrs:
	case c := <-code:
		t.Fatalf("exited %d: %s", c, stderr.String())
	}
	for path, want := range map[string]int{"/": 200, "/index.html": 200, "/.secret": 404, "/nope": 404} {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	sig <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
	if c := run([]string{"--docroot", filepath.Join(dir, "missing"), "--port", "0", "--smp", "1"}, &stderr, sig, nil); c != 2 {
		t.Fatalf("missing docroot: exit %d", c)
	}
}
