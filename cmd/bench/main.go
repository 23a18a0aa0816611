// Command bench runs percore's benchmarks; see package percore/bench/sweep.
//
//	sudo go run ./cmd/bench sweep [--quick] [--smp 1-4] [--rounds 3] [--duration 5s] [--pipeline 1,16]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"percore/bench/sweep"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "sweep" {
		fmt.Fprintln(os.Stderr, "usage: bench sweep [flags] (bench sweep -h lists them)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := sweep.Main(ctx, os.Args[2:], os.Stderr)
	stop()
	os.Exit(code)
}
