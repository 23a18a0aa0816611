// Command echo answers 200 to any method on any path, with the request body
// as the response body and the request's Content-Type, if any.
//
//	go run ./examples/echo --port 8080
//	curl -d 'ping' http://127.0.0.1:8080/anything
package main

import (
	"os"

	"percore"
)

func newServer() *percore.Server {
	s := percore.New()
	// "/" with its trailing slash is a prefix route: every path.
	s.Handle("/", func(w *percore.ResponseWriter, r *percore.Request) {
		if ct := r.Header("content-type"); ct != nil {
			w.Header("Content-Type", string(ct))
		}
		w.Write(r.Body)
	})
	return s
}

func main() { os.Exit(newServer().Main("echo")) }
