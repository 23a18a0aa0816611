// Command bench runs percore's benchmarks; see package percore/bench/sweep.
//
//	sudo go run ./cmd/bench sweep [--quick] [--smp 1-4] [--rounds 3] [--duration 5s] [--pipeline 1,16]
//	sudo go run ./cmd/bench conns [--counts 64,1K,8K,64K,256K,1M] [--servers native,posix,nginx,gnet] [--loads closed,open]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"percore/bench/sweep"
)

func main() {
	modes := map[string]func(context.Context, []string, io.Writer) int{"sweep": sweep.Main, "conns": sweep.ConnsMain}
	if len(os.Args) < 2 || modes[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: bench sweep|conns [flags] (bench sweep -h, bench conns -h list them)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := modes[os.Args[1]](ctx, os.Args[2:], os.Stderr)
	stop()
	os.Exit(code)
}
