package main

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/reuseport"
)

var helloBody = []byte("hello")

// serveFasthttp runs one fasthttp.Server over o.smp SO_REUSEPORT listeners,
// one accept loop each, so the kernel spreads connections as it does for
// percore's posix shards and nginx's workers.
func serveFasthttp(o options, sig <-chan os.Signal) error {
	s := &fasthttp.Server{
		Name:                          "fasthttp",
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) != "/" {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				return
			}
			ctx.Response.Header.SetContentTypeBytes(textPlain)
			ctx.SetBody(helloBody)
		},
	}
	errc := make(chan error, o.smp)
	for i := 0; i < o.smp; i++ {
		ln, err := reuseport.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", o.port))
		if err != nil {
			return fmt.Errorf("listen on port %d: %w", o.port, err)
		}
		go func(ln net.Listener) { errc <- s.Serve(ln) }(ln)
	}
	select {
	case <-sig:
		return s.Shutdown()
	case err := <-errc:
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return err
	}
}

var textPlain = []byte("text/plain")
