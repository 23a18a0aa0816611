package wreck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// testReq is what a test server read of one request.
type testReq struct {
	seq   string // X-Wreck-Seq, "" if absent
	close bool   // Connection: close
}

// readReq reads one request's header section (wreck sends no bodies).
func readReq(br *bufio.Reader) (testReq, error) {
	var r testReq
	line, err := br.ReadString('\n')
	if err != nil {
		return r, err
	}
	if !strings.HasPrefix(line, "GET /") || !strings.HasSuffix(line, " HTTP/1.1\r\n") {
		return r, fmt.Errorf("bad request line %q", line)
	}
	for {
		line, err = br.ReadString('\n')
		if err != nil {
			return r, err
		}
		if line == "\r\n" {
			return r, nil
		}
		name, val, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		val = strings.TrimSpace(val)
		switch strings.ToLower(name) {
		case seqHeader:
			r.seq = val
		case "connection":
			r.close = strings.EqualFold(val, "close")
		}
	}
}

// testServer is an in-process raw TCP server on 127.0.0.1 whose serve func
// decides, per connection, how well it behaves. Tests count what it saw.
type testServer struct {
	ln       net.Listener
	reqs     atomic.Int64 // requests read
	conns    atomic.Int64 // connections accepted
	noClose  atomic.Int64 // one-shot requests that lacked Connection: close
	badReqs  atomic.Int64 // requests that did not parse
	done     chan struct{}
	wg       sync.WaitGroup
	serve    func(s *testServer, c net.Conn, br *bufio.Reader)
	mu       sync.Mutex
	open     []net.Conn
	stopOnce sync.Once
}

func newTestServer(t *testing.T, serve func(s *testServer, c net.Conn, br *bufio.Reader)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &testServer{ln: ln, done: make(chan struct{}), serve: serve}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.mu.Lock()
			s.open = append(s.open, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.serve(s, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

// next reads one request and counts it; false at EOF or error.
func (s *testServer) next(br *bufio.Reader) (testReq, bool) {
	r, err := readReq(br)
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			s.badReqs.Add(1)
		}
		return r, false
	}
	s.reqs.Add(1)
	return r, true
}

func (s *testServer) stop() {
	s.stopOnce.Do(func() {
		close(s.done)
		s.ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// respond writes a response with body; seq is echoed if set.
func respond(w io.Writer, status int, seq, body string, chunked, closeConn bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d X\r\n", status)
	if seq != "" {
		fmt.Fprintf(&b, "X-Wreck-Seq: %s\r\n", seq)
	}
	if closeConn {
		b.WriteString("Connection: close\r\n")
	}
	if chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		step := 3 // small chunks split heads and chunk lines across reads
		if len(body) > 1000 {
			step = 4000
		}
		for len(body) > 0 {
			n := min(len(body), step)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		b.WriteString("0\r\n\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// goodServer answers every request with 200, echoing X-Wreck-Seq, in order,
// flushing when no further request is buffered (so pipelined replies batch).
func goodServer(chunked bool) func(*testServer, net.Conn, *bufio.Reader) {
	return func(s *testServer, c net.Conn, br *bufio.Reader) {
		bw := bufio.NewWriter(c)
		for {
			r, ok := s.next(br)
			if !ok {
				return
			}
			if err := respond(bw, 200, r.seq, "hello, wreck", chunked, r.close); err != nil {
				return
			}
			if br.Buffered() == 0 || r.close {
				if bw.Flush() != nil {
					return
				}
			}
			if r.close {
				return
			}
		}
	}
}
