package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run the httpd command as a child process: the test binary itself,
// re-executed with PERCORE_HTTPD_CHILD=1, runs main.
func TestMain(m *testing.M) {
	if os.Getenv("PERCORE_HTTPD_CHILD") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PERCORE_HTTPD_CHILD=1")
	return cmd
}

// runToExit runs the command to completion, bounded, and returns its exit
// status and stderr.
func runToExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := command(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("httpd %v did not exit", args)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadFlagExits2(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--smp", "many"}, {"--network-stack", "native"}, {"--port", "-3"}} {
		code, stderr := runToExit(t, args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "httpd: ") {
			t.Errorf("httpd %v: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
}

func TestPortInUseExits2(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	code, stderr := runToExit(t, "--smp", "1", "--address", "127.0.0.1", "--port", fmt.Sprint(port))
	if code != 2 || !strings.Contains(stderr, "in use") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want 2 and one line saying the port is in use", code, stderr)
	}
}

// TestGracefulStopFinishesInFlight starts httpd --smp 2, begins a 32 MiB
// response that cannot fit in the socket buffers, sends SIGTERM, and checks the
// whole response still arrives, an idle keep-alive connection is closed, and
// httpd exits 0.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	must(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	cmd := command("--smp", "2", "--address", "127.0.0.1", "--port", "0", "--docroot", dir)
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	exited := make(chan error, 1)
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
		}
	})
	sc := bufio.NewScanner(stderr)
	var addr string
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "serving http://"); ok {
			addr, _, _ = strings.Cut(rest, "/")
			break
		}
		t.Logf("httpd: %s", sc.Text())
	}
	if addr == "" {
		t.Fatal("httpd did not report its address")
	}
	var log strings.Builder
	go func() {
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
		exited <- cmd.Wait()
	}()

	idle, err := net.DialTimeout("tcp", addr, 5*time.Second)
	must(t, err)
	defer idle.Close()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	must(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	must(t, err)
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(big)) {
		t.Fatalf("GET /big.bin: %d, Content-Length %d", resp.StatusCode, resp.ContentLength)
	}
	// The response has started and most of it is still in the server.
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("after SIGTERM got %d of %d bytes (equal %v), err %v", len(got), len(big), bytes.Equal(got, big), err)
	}
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: read %d, %v; want EOF", n, err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("httpd exited with %v; stderr:\n%s", err, log.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("httpd did not exit after SIGTERM")
	}
	t.Logf("httpd stderr:\n%s", log.String())
	if !strings.Contains(log.String(), "stopped") {
		t.Fatalf("stderr lacks the stop line:\n%s", log.String())
	}
}
