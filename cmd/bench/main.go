// Command bench runs percore's benchmarks; see package percore/bench/sweep.
//
//	sudo go run ./cmd/bench sweep [--quick] [--smp 1-4] [--rounds 3] [--duration 5s] [--pipeline 1,16]
//	go run ./cmd/bench specweb [--lo 100] [--hi 2000] [--steps 6] [--duration 20s] (package percore/bench/specsearch)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"percore/bench/specsearch"
	"percore/bench/sweep"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "sweep" && os.Args[1] != "specweb" {
		fmt.Fprintln(os.Stderr, "usage: bench sweep|specweb [flags] (bench sweep -h lists them)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	var code int
	if os.Args[1] == "specweb" {
		code = specsearch.Main(ctx, os.Args[2:], os.Stdout, os.Stderr)
	} else {
		code = sweep.Main(ctx, os.Args[2:], os.Stderr)
	}
	stop()
	os.Exit(code)
}
