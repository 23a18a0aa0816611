// Command hello is the smallest percore program: one route, the httpd
// command's flags, served until SIGINT or SIGTERM.
//
//	go run ./examples/hello --port 8080
//	curl http://127.0.0.1:8080/hello
package main

import (
	"os"

	"percore"
)

func newServer() *percore.Server {
	s := percore.New()
	s.HandleMethod("GET", "/hello", func(w *percore.ResponseWriter, r *percore.Request) {
		w.Header("Content-Type", "text/plain; charset=utf-8")
		w.WriteString("hello from percore\n")
	})
	return s
}

func main() { os.Exit(newServer().Main("hello")) }
