package specweb

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"time"

	"percore"
)

// The CGI-style GET runs a separate program per request, as CGI does (RFC
// 3875): fork and exec happen on one of the shard's file I/O goroutines
// (ResponseWriter.Offload), never on the shard, and the handler answers
// with the program's output once it has exited. The program is given the
// request in the CGI environment (QUERY_STRING, REMOTE_ADDR, SCRIPT_NAME)
// and the file set's directory in DOCUMENT_ROOT; package cgiprog is its
// side.

const (
	// cgiTimeout bounds one run of the program: a hung one is killed and
	// its request answered 504, so it holds an I/O goroutine no longer.
	cgiTimeout = 10 * time.Second
	// maxCGIOutput bounds what the program may write: the largest file,
	// its page around it and the CGI header fields.
	maxCGIOutput = 1<<20 + 4096
)

// cgiJob is one run of the CGI program, off the shard.
type cgiJob struct {
	argv, env []string
	out       limitedBuffer
	err       error
}

// Run implements percore.Job: it starts the program and waits for it.
func (j *cgiJob) Run() {
	ctx, cancel := context.WithTimeout(context.Background(), cgiTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, j.argv[0], j.argv[1:]...)
	cmd.Env = j.env
	cmd.Stdout = &j.out
	j.err = cmd.Run()
	if ctx.Err() != nil {
		j.err = errCGITimeout
	}
}

var (
	errCGITimeout = errors.New("the CGI program ran out of time")
	errCGIOutput  = errors.New("the CGI program wrote too much")
)

// limitedBuffer keeps up to maxCGIOutput bytes and fails past them, which
// ends the program's output early.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > maxCGIOutput {
		return 0, errCGIOutput
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

// cgi serves the CGI-style GET: the first call checks the request and hands
// the program's run off the shard; the second answers with its output.
func (a *App) cgi(w *percore.ResponseWriter, r *percore.Request) {
	if j, ok := w.Offloaded().(*cgiJob); ok {
		a.cgiAnswer(w, j)
		return
	}
	if len(a.cfg.CGI) == 0 {
		fail(w, 501, "specweb: no CGI program is configured")
		return
	}
	if _, _, ok := a.file(r.Query); !ok {
		fail(w, 404, "specweb: want ?/file_set/dirNNNNN/classC_Y of a file in the set")
		return
	}
	w.Offload(&cgiJob{argv: a.cfg.CGI, env: []string{
		"GATEWAY_INTERFACE=CGI/1.1",
		"REQUEST_METHOD=GET",
		"SERVER_SOFTWARE=percore",
		"DOCUMENT_ROOT=" + a.root,
		"SCRIPT_NAME=" + string(r.Path),
		"QUERY_STRING=" + string(r.Query),
		"REMOTE_ADDR=" + r.Remote.Addr().Unmap().String(),
	}})
}

// cgiAnswer turns the program's output (header fields, a blank line, the
// body) into the response: a Status field sets the status.
func (a *App) cgiAnswer(w *percore.ResponseWriter, j *cgiJob) {
	switch {
	case errors.Is(j.err, errCGITimeout):
		fail(w, 504, "specweb: "+j.err.Error())
		return
	case j.err != nil:
		fail(w, 502, "specweb: the CGI program failed: "+j.err.Error())
		return
	}
	out := j.out.b
	end, sep := bytes.Index(out, []byte("\r\n\r\n")), 4
	if lf := bytes.Index(out, []byte("\n\n")); lf >= 0 && (end < 0 || lf < end) {
		end, sep = lf, 2
	}
	if end < 0 {
		fail(w, 502, "specweb: the CGI program wrote no header")
		return
	}
	for _, line := range bytes.Split(out[:end], []byte("\n")) {
		name, value, ok := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		value = bytes.TrimSpace(value)
		if !ok {
			fail(w, 502, "specweb: the CGI program wrote a malformed header line")
			return
		}
		if string(bytes.ToLower(name)) == "status" {
			code, _, _ := bytes.Cut(value, []byte(" "))
			n, err := strconv.Atoi(string(code))
			if err != nil || n < 200 || n > 599 {
				fail(w, 502, "specweb: the CGI program wrote a bad Status")
				return
			}
			w.WriteHeader(n)
			continue
		}
		w.HeaderBytes(string(name), value)
	}
	w.Write(out[end+sep:])
}
