// Command wreck is percore's HTTP/1.1 load generator; see package wreck.
//
//	wreck --server 127.0.0.1:8080 --smp 2 --conn 64 --duration 10s [--pipeline 16] [--json]
package main

import (
	"os"

	"percore/wreck"
)

func main() {
	os.Exit(wreck.Main(os.Args[1:], os.Stdout, os.Stderr))
}
