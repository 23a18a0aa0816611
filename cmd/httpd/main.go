// Command httpd is percore's HTTP/1.1 server: one shard per core serving static
// files and the built-in hello route. See README.md for the flags.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"percore/server"
)

func main() {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(server.Main(os.Args[1:], os.Stderr, sig))
}
