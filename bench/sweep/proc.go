package sweep

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a server process the sweep started, in its own process group (a
// master with workers, or `ip netns exec` that execs the server, is one
// group). stop signals that group by its id, so nothing else is touched.
// Owned by the goroutine that started it; stop is idempotent.
type proc struct {
	name string
	cmd  *exec.Cmd
	logs *syncBuffer   // combined stdout and stderr (tail shown on failure)
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
	once sync.Once
}

// syncBuffer is a bytes.Buffer safe for the writer goroutines of exec.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Len() > 1<<20 { // a chatty server must not fill memory: keep the start
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// startProc starts argv in a new process group.
func startProc(name string, argv []string, env []string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	p := &proc{name: name, cmd: cmd, logs: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs
// the group. Safe to call twice.
func (p *proc) stop(grace time.Duration) {
	p.once.Do(func() {
		pgid := p.cmd.Process.Pid // Setpgid: the group id is the leader's pid
		if !p.exited() {
			syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(grace):
			}
		}
		// Workers of a master that exited first are still in the group.
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	})
}

// tail returns the last lines of the process's output, for error messages.
func (p *proc) tail() string {
	s := strings.TrimSpace(p.logs.String())
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// runClient runs a client to completion and returns its stdout. A context
// cancel kills its process group. Its stderr goes to the error on failure.
func runClient(ctx context.Context, argv []string) ([]byte, error) {
	return runClientPid(ctx, argv, nil)
}

// runClientPid is runClient that tells started (if not nil) the client's
// pid, which is also its process group's id, once it runs.
func runClientPid(ctx context.Context, argv []string, started func(pid int)) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return nil, ctx.Err()
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return stdout.Bytes(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return stdout.Bytes(), nil
}
