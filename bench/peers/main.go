// Command peers holds the Go kernel-stack servers that percore's sweep
// compares against: fasthttp and gnet, each answering GET / with the same
// 5-byte "hello" that percore's built-in route sends (Server, Date,
// Content-Type and Content-Length headers, keep-alive, pipelining).
//
//	peers fasthttp --port 18081 --smp 2 --cpuset 0-1
//	peers gnet     --port 18082 --smp 2 --cpuset 0-1
//
// It is a module of its own (percore/bench/peers) so that fasthttp, gnet and
// their dependencies never enter percore's go.mod. Build it with
// `cd bench/peers && go build`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// options are the flags every peer takes.
type options struct {
	port   int
	smp    int   // GOMAXPROCS and listeners or event loops
	cpuset []int // CPUs the whole process is pinned to (nil: unpinned)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: peers fasthttp|gnet --port P --smp N [--cpuset 0-3]")
		return 2
	}
	name := args[0]
	serve, ok := map[string]func(options, <-chan os.Signal) error{
		"fasthttp": serveFasthttp,
		"gnet":     serveGnet,
	}[name]
	if !ok {
		fmt.Fprintf(stderr, "peers: unknown server %q: choose fasthttp or gnet\n", name)
		return 2
	}
	o, err := parseFlags(name, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "peers %s: %v\n", name, err)
		return 2
	}
	if err := pin(o); err != nil {
		fmt.Fprintf(stderr, "peers %s: %v\n", name, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if err := serve(o, sig); err != nil {
		fmt.Fprintf(stderr, "peers %s: %v\n", name, err)
		return 1
	}
	return 0
}

func parseFlags(name string, args []string) (options, error) {
	var o options
	var cpuset string
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.IntVar(&o.port, "port", 8080, "TCP port to listen on (all addresses)")
	fs.IntVar(&o.smp, "smp", 1, "cores: GOMAXPROCS and the number of listeners (fasthttp) or event loops (gnet)")
	fs.StringVar(&cpuset, "cpuset", "", "pin the whole process to these CPUs, e.g. 0-3,6 (default: unpinned)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: all options are flags", fs.Arg(0))
	}
	if o.port < 1 || o.port > 65535 {
		return o, fmt.Errorf("--port %d: choose 1 to 65535", o.port)
	}
	if o.smp < 1 {
		return o, fmt.Errorf("--smp %d: give 1 or more", o.smp)
	}
	if cpuset != "" {
		set, err := parseCPUSet(cpuset)
		if err != nil {
			return o, fmt.Errorf("--cpuset %q: %v; write CPUs like 0-3,6", cpuset, err)
		}
		o.cpuset = set
	}
	return o, nil
}
