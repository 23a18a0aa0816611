// Command bench runs percore's benchmarks; see package percore/bench/sweep.
//
//	sudo go run ./cmd/bench sweep [--quick] [--smp 1-4] [--rounds 3] [--duration 5s] [--pipeline 1,16]
//	go run ./cmd/bench specweb [--lo 100] [--hi 2000] [--steps 6] [--duration 20s] (package percore/bench/specsearch)
//	sudo go run ./cmd/bench conns [--counts 64,1K,8K,64K,256K,1M] [--servers native,posix,nginx,gnet] [--loads closed,open]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"percore/bench/specsearch"
	"percore/bench/sweep"
)

func main() {
	specweb := func(ctx context.Context, args []string, stderr io.Writer) int {
		return specsearch.Main(ctx, args, os.Stdout, stderr)
	}
	modes := map[string]func(context.Context, []string, io.Writer) int{"sweep": sweep.Main, "conns": sweep.ConnsMain, "specweb": specweb}
	if len(os.Args) < 2 || modes[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: bench sweep|conns|specweb [flags] (bench MODE -h lists them)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := modes[os.Args[1]](ctx, os.Args[2:], os.Stderr)
	stop()
	os.Exit(code)
}
