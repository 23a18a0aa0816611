// Command specweb is the SPECweb99 workload's server side on percore: it
// generates the file set and serves it with the workload's dynamic content.
//
//	specweb gen --conns 20 --dir /srv/web99            # the file set for 20 connections
//	specweb serve --dir /srv/web99 --port 8080 --smp 2 # plus any flag of httpd
//
// gen is resumable (run it again after an interruption) and reports its
// progress on stderr. serve runs "specweb cgi" (this program again, as a CGI
// program: the request in its environment, the response on its stdout) for
// each CGI-style GET, off the shards. serve reads the files as they are asked for, through
// one per-shard cache (--cache-size) that the static and the dynamic GETs
// share, so the set may be larger than memory; SIGHUP empties the cache.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"percore"
	"percore/specweb"
	"percore/specweb/cgiprog"
)

const usage = `usage:
  specweb gen --conns C --dir D [--seed N] [--users U]
  specweb serve --dir D [--seed N] [--command-from ADDR,...] [--post-log FILE] [httpd flags: --port, --smp, --network-stack ...]
  specweb cgi    (run by serve: one CGI-style GET from the CGI environment)
`

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(run(os.Args[1:], os.Stderr, sig, nil))
}

// run runs one subcommand and returns the exit status; started, if set,
// gets serve's address once it serves.
func run(args []string, stderr io.Writer, sig <-chan os.Signal, started func(netip.AddrPort)) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "gen":
		return gen(args[1:], stderr)
	case "serve":
		return serve(args[1:], stderr, sig, started)
	case "cgi":
		if err := cgiprog.Serve(os.Getenv, os.Stdout); err != nil {
			fmt.Fprintf(stderr, "specweb cgi: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "specweb: unknown command %q\n%s", args[0], usage)
	return 2
}

func gen(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("specweb gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conns := fs.Int("conns", 0, "simultaneous connections the file set is for (sets the number of directories)")
	dir := fs.String("dir", "", "directory to write file_set/, User.Personality and Custom.Ads into")
	seed := fs.Uint64("seed", 1, "seed of User.Personality and Custom.Ads")
	users := fs.Int("users", 0, "users in User.Personality (default: one per connection)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *conns < 1 || *dir == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "specweb gen: give --conns (1 or more) and --dir\n")
		return 2
	}
	if *users == 0 {
		*users = min(*conns, specweb.MaxUsers)
	}
	dirs := specweb.Dirs(*conns)
	fmt.Fprintf(stderr, "specweb gen: %d connections: %d directories, %s, in %s\n",
		*conns, dirs, size(int64(dirs)*specweb.DirBytes()), *dir)
	shown := -1
	err := specweb.Generate(*dir, dirs, *seed, *users, func(p specweb.Progress) {
		if pct := p.Dir * 100 / p.Dirs; pct/5 != shown/5 || p.Dir == p.Dirs {
			shown = pct
			fmt.Fprintf(stderr, "specweb gen: %3d%% %d/%d directories, %s written, %s already there\n",
				pct, p.Dir, p.Dirs, size(p.Written), size(p.Skipped))
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "specweb %v\n", err)
		return 1
	}
	return 0
}

func size(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func serve(args []string, stderr io.Writer, sig <-chan os.Signal, started func(netip.AddrPort)) int {
	mine, rest := splitFlags(args, "dir", "seed", "command-from", "post-log", "cgi")
	fs := flag.NewFlagSet("specweb serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the file set's directory (specweb gen --dir); also the docroot")
	seed := fs.Uint64("seed", 1, "seed ?command/Reset draws User.Personality and Custom.Ads from")
	from := fs.String("command-from", "127.0.0.1,::1", "client addresses allowed ?command/Reset and ?command/Fetch, a comma list")
	postLog := fs.String("post-log", "", "file the post log is copied to every second and at stop (default: .post.log in --dir; \"-\": none)")
	cgiProgram := fs.String("cgi", "", "the CGI program run once per CGI-style GET (default: specweb-cgi beside this program, else \"specweb cgi\")")
	if err := fs.Parse(mine); err != nil {
		return 2
	}
	o, err := percore.ParseFlags(rest)
	if errors.Is(err, percore.ErrHelp) {
		fmt.Fprintln(stderr, "and specweb serve's own:")
		fs.PrintDefaults()
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "specweb serve: %v\n", err)
		return 2
	}
	if *dir == "" || o.Docroot != "" {
		fmt.Fprintf(stderr, "specweb serve: give --dir (the file set's directory, which is also the docroot; no --docroot)\n")
		return 2
	}
	cgi, err := cgiCommand(*cgiProgram)
	if err != nil {
		fmt.Fprintf(stderr, "specweb serve: %v (--cgi names the CGI program)\n", err)
		return 2
	}
	cfg := specweb.Config{Seed: *seed, CGI: cgi}
	for _, s := range strings.Split(*from, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(stderr, "specweb serve: --command-from %q: want IP addresses, comma-separated\n", *from)
			return 2
		}
		cfg.CommandFrom = append(cfg.CommandFrom, a)
	}
	app, err := specweb.Load(*dir, cfg)
	if errors.Is(err, specweb.ErrNoFileSet) {
		fmt.Fprintf(stderr, "specweb serve: no file set in %s: make one with specweb gen --conns C --dir %s\n", *dir, *dir)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "specweb serve: %s: %v (specweb gen --dir %s completes it)\n", *dir, err, *dir)
		return 2
	}
	o.Docroot = *dir
	if o.Native.Logf == nil {
		o.Native.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, "specweb serve: "+f+"\n", a...) }
	}
	var logFile *os.File
	if *postLog == "" {
		*postLog = filepath.Join(*dir, ".post.log") // a dotfile: the static path does not serve it
	}
	if *postLog != "-" {
		if logFile, err = os.Create(*postLog); err != nil {
			fmt.Fprintf(stderr, "specweb serve: %v (--post-log names another file, - none)\n", err)
			return 2
		}
	}
	s := percore.New()
	app.Register(s)
	if err := s.Start(o); err != nil {
		fmt.Fprintf(stderr, "specweb serve: %v\n", err)
		if logFile != nil {
			logFile.Close()
		}
		return 2
	}
	stopLog, logDone := make(chan struct{}), make(chan error, 1)
	if logFile != nil {
		go func() { logDone <- app.Persist(logFile, time.Second, stopLog) }()
	} else {
		logDone <- nil
	}
	where := fmt.Sprintf("http://%s/", s.Addr())
	switch {
	case o.TLS.Cert != "" && o.TLSPort < 0:
		where = fmt.Sprintf("https://%s/", s.Addr()) // SPECweb99_SSL
	case o.TLS.Cert != "" && o.TLSPort > 0:
		where += fmt.Sprintf(" and https on port %d", o.TLSPort)
	}
	fmt.Fprintf(stderr, "specweb serve: %d directories from %s on %s (%s stack)\n", app.Dirs(), *dir, where, o.NetworkStack)
	if started != nil {
		started(s.Addr())
	}
	stopStats := make(chan struct{})
	if o.StatsInterval > 0 {
		go printStats(stderr, s, o.StatsInterval, stopStats)
	}
	for waiting := true; waiting; {
		select {
		case v := <-sig:
			if v == syscall.SIGHUP {
				s.Reload()
				fmt.Fprintf(stderr, "specweb serve: SIGHUP: cached files dropped\n")
				continue
			}
			waiting = false
		case <-s.Done():
			waiting = false
		}
	}
	close(stopStats)
	s.Stop()
	// Shards force-close at the stop timeout; a second signal cuts it short.
	code := 0
	select {
	case <-s.Done(): // every handler has returned: the last copy is complete
	case <-sig:
		fmt.Fprintf(stderr, "specweb serve: second signal: exiting without finishing\n")
		code = 1
	}
	close(stopLog)
	if err := <-logDone; err != nil {
		fmt.Fprintf(stderr, "specweb serve: %v\n", err)
		code = 1
	}
	return code
}

// cgiCommand is the CGI program to run: program if given, else
// specweb-cgi beside this program (it starts several times faster than
// specweb, which links the whole server), else this program's cgi command.
func cgiCommand(program string) ([]string, error) {
	if program != "" {
		p, err := exec.LookPath(program)
		if err != nil {
			return nil, err
		}
		p, err = filepath.Abs(p)
		return []string{p}, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this program: %w", err)
	}
	if small := filepath.Join(filepath.Dir(self), "specweb-cgi"); unix.Access(small, unix.X_OK) == nil {
		return []string{small}, nil
	}
	return []string{self, "cgi"}, nil
}

// splitFlags separates the flags named in ours ("-name v", "--name v",
// "--name=v") from the others, which keep their order.
func splitFlags(args []string, ours ...string) (mine, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(ours, name) {
			rest = append(rest, a)
			continue
		}
		mine = append(mine, a)
		if !hasValue && i+1 < len(args) {
			i++
			mine = append(mine, args[i])
		}
	}
	return mine, rest
}

// printStats prints the requests served per second every interval.
func printStats(stderr io.Writer, s *percore.Server, every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	prev, at := percore.Merge(s.Stats()).Get("http.requests"), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			cur := percore.Merge(s.Stats()).Get("http.requests")
			fmt.Fprintf(stderr, "specweb serve: %.0f requests/s\n", float64(cur-prev)/now.Sub(at).Seconds())
			prev, at = cur, now
		}
	}
}
