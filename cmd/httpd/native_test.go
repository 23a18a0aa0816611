package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"percore/afxdp"
	"percore/lab"
)

// TestNativeLabCommand runs `httpd --network-stack native --lab --smp 2` as a
// child process, runs the curl line it prints (as printed) in the client
// namespace, waits for a stats line, sends SIGTERM and checks httpd exits 0
// and removed its lab.
func TestNativeLabCommand(t *testing.T) {
	if err := afxdp.Supported(); err != nil {
		t.Skip(err)
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs for --smp 2")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	cmd := command("--network-stack", "native", "--lab", "--smp", "2", "--stats-interval", "200ms")
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second // bound Wait even if something holds the pipes
	must(t, cmd.Start())
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	var ns string
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if ns != "" { // a killed httpd cannot remove its lab: do it here
			lab.RemoveByName([]string{ns})
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var curl []string
	for curl == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("httpd printed no curl line; stderr:\n%s", stderr.String())
			}
			t.Logf("stdout: %s", l)
			if f := strings.Fields(l); len(f) > 4 && f[0] == "ip" && f[4] == "curl" {
				curl, ns = f, f[3]
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no curl line within 30s; stderr:\n%s", stderr.String())
		}
	}
	out, err := exec.Command(curl[0], append(curl[1:], "--max-time", "10")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello") {
		t.Fatalf("%v: %v: %q", curl, err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "req/s"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no stats line on stderr:\n%s", stderr.String())
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("httpd exited with %v; stderr:\n%s", exitErr, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("httpd did not exit within 20s of SIGTERM")
	}
	if names, _ := lab.List(ns); len(names) != 0 {
		t.Fatalf("httpd left its lab behind: %v", names)
	}
	if !strings.Contains(stderr.String(), "stopped") {
		t.Fatalf("stderr lacks the stop line:\n%s", stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer the child's stderr copier and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
