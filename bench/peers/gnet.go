package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// maxHead bounds a request header section; a longer one closes the
// connection (the hello benchmark's requests are under 100 bytes).
const maxHead = 8192

// gnetHello answers every complete request in a read with one write, in
// order, so pipelined requests cost one syscall per batch as in percore.
// Requests are bodyless GETs (what the sweep sends); the event loops share
// only the Date line, swapped once a second.
type gnetHello struct {
	gnet.BuiltinEventEngine
	eng  gnet.Engine
	head atomic.Pointer[[]byte] // "HTTP/1.1 200 OK\r\nServer..Date..\r\n" for this second
}

func (h *gnetHello) OnBoot(eng gnet.Engine) gnet.Action {
	h.eng = eng
	return gnet.None
}

func (h *gnetHello) OnTick() (time.Duration, gnet.Action) {
	h.setDate(time.Now())
	return time.Second, gnet.None
}

func (h *gnetHello) setDate(now time.Time) {
	b := []byte("HTTP/1.1 200 OK\r\nServer: gnet\r\nDate: ")
	b = now.UTC().AppendFormat(b, "Mon, 02 Jan 2006 15:04:05 GMT")
	b = append(b, "\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"...)
	h.head.Store(&b)
}

var (
	crlf2    = []byte("\r\n\r\n")
	getRoot  = []byte("GET / ")
	notFound = []byte("HTTP/1.1 404 Not Found\r\nServer: gnet\r\nContent-Length: 0\r\n\r\n")
)

func (h *gnetHello) OnTraffic(c gnet.Conn) gnet.Action {
	in, _ := c.Peek(-1)
	out, _ := c.Context().([]byte)
	out = out[:0]
	hello := *h.head.Load()
	used := 0
	for {
		end := bytes.Index(in[used:], crlf2)
		if end < 0 {
			break
		}
		if bytes.HasPrefix(in[used:], getRoot) {
			out = append(out, hello...)
		} else {
			out = append(out, notFound...)
		}
		used += end + len(crlf2)
	}
	if len(in)-used > maxHead {
		return gnet.Close
	}
	c.Discard(used)
	c.SetContext(out) // keep the grown buffer for the next read
	if len(out) > 0 {
		if _, err := c.Write(out); err != nil {
			return gnet.Close
		}
	}
	return gnet.None
}

// serveGnet runs o.smp event loops, each on its own locked thread with its
// own SO_REUSEPORT listener.
func serveGnet(o options, sig <-chan os.Signal) error {
	h := &gnetHello{}
	h.setDate(time.Now())
	errc := make(chan error, 1)
	addr := fmt.Sprintf("tcp4://0.0.0.0:%d", o.port)
	go func() {
		errc <- gnet.Run(h, addr,
			gnet.WithMulticore(true), gnet.WithNumEventLoop(o.smp),
			gnet.WithReusePort(true), gnet.WithLockOSThread(true),
			gnet.WithTicker(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay))
	}()
	select {
	case err := <-errc:
		return err
	case <-sig:
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return h.eng.Stop(ctx)
	}
}
