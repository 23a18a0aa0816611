// Command static serves a directory, and shows percore used from code rather
// than through Main: flags parsed with ParseFlags, then Start, Stop and Done.
//
//	go run ./examples/static --docroot ./docs --port 8080
//	curl http://127.0.0.1:8080/architecture.md
//
// Without --docroot it serves the current directory. Files are read as they
// are asked for and cached per shard (--cache-size); dotfiles and symbolic
// links are not served.
package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"percore"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stderr, sig, nil))
}

// run serves until a signal; started, if set, gets the address once serving.
func run(args []string, stderr io.Writer, sig <-chan os.Signal, started func(netip.AddrPort)) int {
	o, err := percore.ParseFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "static: %v\n", err)
		return 2
	}
	if o.Docroot == "" {
		o.Docroot = "."
	}
	s := percore.New()
	if err := s.Start(o); err != nil {
		fmt.Fprintf(stderr, "static: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "static: serving %s on http://%s/\n", o.Docroot, s.Addr())
	if started != nil {
		started(s.Addr())
	}
	select {
	case <-sig:
		s.Stop()
		<-s.Done()
	case <-s.Done():
	}
	return 0
}
