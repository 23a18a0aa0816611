package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"percore/internal/testutil"
	"percore/lab"
)

func needRoot(t *testing.T) {
	t.Helper()
	testutil.NeedRoot(t, "the sweep builds network namespaces and veth pairs")
	for _, tool := range []string{"wrk", "ip", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install wrk iproute2 (CI's .ci/run installs them)", tool)
		}
	}
}

func quickConfig(t *testing.T) Config {
	root, err := FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := QuickConfig()
	c.Root = root
	c.Out = filepath.Join(dir, "benchmarks.md")
	c.JSON = filepath.Join(dir, "sweep.json")
	c.SVG = "" // the plot module is tested on its own (cd bench/plot && go test)
	c.Command = "go test ./bench/sweep -run TestQuickSweep"
	c.Log = &testLog{t: t}
	return c
}

// testLog sends the sweep's progress lines to t.Log and, when cancelOn is
// set, calls cancel at the first line containing it.
type testLog struct {
	t        *testing.T
	mu       sync.Mutex
	cancelOn string
	cancel   func()
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	if l.cancel != nil && bytes.Contains(p, []byte(l.cancelOn)) {
		l.cancel()
		l.cancel = nil
	}
	return len(p), nil
}

// TestQuickSweep runs `bench sweep --quick` (all servers, both clients,
// --smp 1..nproc, one round of 1 s) and checks that the report it writes has
// every table with the expected columns and a number in every cell. The
// figures themselves are not asserted.
func TestQuickSweep(t *testing.T) {
	needRoot(t)
	cfg := quickConfig(t)
	os.WriteFile(cfg.Out, []byte("# Benchmarks\n\n## Other\n\nkept\n"), 0o644)
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteFiles(nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if !strings.Contains(md, "## Other\n\nkept\n") || strings.Count(md, Heading) != 1 {
		t.Errorf("the other section was not kept, or the heading is not there once:\n%s", md)
	}
	for name, why := range res.Skipped {
		t.Logf("skipped %s: %s", name, why)
		if !strings.Contains(md, "skipped "+Labels[name]+": ") {
			t.Errorf("report does not say why %s was skipped", name)
		}
	}
	// percore's posix stack and nginx need nothing but root and apt packages.
	for _, must := range []string{"posix", "nginx"} {
		if why, ok := res.Skipped[must]; ok {
			t.Errorf("%s was skipped: %s", must, why)
		}
	}
	checkTables(t, md, cfg, res)
	if _, err := os.Stat(cfg.JSON); err != nil {
		t.Errorf("no JSON samples: %v", err)
	}
}

func checkTables(t *testing.T, md string, cfg Config, res *Results) {
	t.Helper()
	tables, err := ParseTables(md)
	if err != nil {
		t.Fatalf("tables do not parse: %v\n%s", err, md)
	}
	var ran []string
	for _, s := range cfg.Servers {
		if res.has(s) {
			ran = append(ran, s)
		}
	}
	smpCols := []string{"server", "client"}
	for _, k := range cfg.SMPs {
		smpCols = append(smpCols, "smp "+strconv.Itoa(k))
	}
	var clients []string // the clients that ran
	for _, c := range cfg.Clients {
		if _, skip := res.SkippedClients[c]; !skip {
			clients = append(clients, c)
		}
	}
	want := map[string][]string{
		"Requests/s":                       smpCols,
		"Whole-machine CPU-µs per request": smpCols,
		"Beside Seastar's published sweep": {"cores", "Seastar req/s", "Seastar req/s per core", "percore native req/s", "percore native req/s per core"},
	}
	rows := 0 // (server, client) pairs: wreck-native drives percore native only
	for _, c := range clients {
		for _, s := range ran {
			if c != "wreck-native" || s == "native" {
				rows++
			}
		}
	}
	wantRows := map[string]int{"Requests/s": rows, "Whole-machine CPU-µs per request": rows}
	for _, c := range clients {
		title := "Latency in µs, " + c + " (median over rounds)"
		want[title] = []string{"server", "smp", "p50", "p90", "p99", "p99.9", "max", "errors"}
		if c == "wrk" {
			want[title] = []string{"server", "smp", "p50", "p90", "p99", "max", "errors"}
		}
		wantRows[title] = len(ran) * len(cfg.SMPs)
		if c == "wreck-native" {
			wantRows[title] = len(cfg.SMPs)
		}
	}
	seen := map[string]int{}
	for _, tab := range tables {
		cols, ok := want[tab.Title]
		if !ok {
			t.Errorf("unexpected table under %q", tab.Title)
			continue
		}
		seen[tab.Title]++
		if !slices.Equal(tab.Header, cols) {
			t.Errorf("%s: columns %q, want %q", tab.Title, tab.Header, cols)
			continue
		}
		if n, ok := wantRows[tab.Title]; ok && len(tab.Rows) != n {
			t.Errorf("%s: %d rows, want %d", tab.Title, len(tab.Rows), n)
		}
		for _, row := range tab.Rows {
			first := 1 // the server name
			if tab.Title == "Requests/s" || tab.Title == "Whole-machine CPU-µs per request" {
				first = 2 // and the client
				if !slices.Contains(clients, row[1]) {
					t.Errorf("%s: client %q", tab.Title, row[1])
				}
			}
			if tab.Title == "Beside Seastar's published sweep" {
				first = 0
			} else if !slices.ContainsFunc(ran, func(s string) bool { return Labels[s] == row[0] }) {
				t.Errorf("%s: server %q did not run", tab.Title, row[0])
			}
			for i, c := range row[first:] {
				if tab.Title == "Beside Seastar's published sweep" && c == "–" {
					continue // a core count one setup has no figure for
				}
				if strings.HasPrefix(tab.Title, "Latency in µs, wrk") && c == "–" {
					continue // wrk reported no such percentile in any round
				}
				if _, _, _, err := ParseCell(c); err != nil {
					t.Errorf("%s: row %q column %q: %v", tab.Title, row[0], tab.Header[first+i], err)
				}
			}
		}
	}
	for title := range want {
		if seen[title] != len(cfg.Pipeline) && !(title == "Beside Seastar's published sweep" && seen[title] == 1) {
			t.Errorf("table %q appears %d times, want one per pipeline depth", title, seen[title])
		}
	}
}

// TestSweepCleansUpOnCancel cancels the sweep right after its first measured
// run, with the server up and the second client starting, and checks that no
// process it started and no namespace of its lab is left.
func TestSweepCleansUpOnCancel(t *testing.T) {
	needRoot(t)
	cfg := quickConfig(t)
	cfg.Servers, cfg.SMPs = []string{"posix", "nginx"}, []int{1}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := cfg.Log.(*testLog)
	log.cancelOn, log.cancel = "<- wreck", cancel
	before := sweepNamespaces(t)
	_, err := Run(ctx, cfg)
	if err == nil {
		t.Fatal("Run finished despite the cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("processes left behind: %v", kids)
	}
	for _, ns := range sweepNamespaces(t) {
		if !slices.Contains(before, ns) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
}

// sweepNamespaces lists named namespaces with the sweep's lab prefix.
func sweepNamespaces(t *testing.T) []string {
	ents, err := os.ReadDir("/var/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "sw") {
			ns = append(ns, e.Name())
		}
	}
	return ns
}

// children lists this process's child processes (pid: command).
func children(t *testing.T) []string {
	me := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	var kids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == me {
			kids = append(kids, fmt.Sprintf("%s: %s", e.Name(), s[:strings.LastIndexByte(s, ')')+1]))
		}
	}
	return kids
}

// TestIfaceMode runs the bare-metal path (--iface, --client-exec) on a lab
// whose server end stands in for the NIC in this namespace and whose client
// namespace stands in for the client machine: the servers start without a
// namespace prefix, the client commands and the readiness probe go through
// the exec prefix, and the report describes the NIC setup.
func TestIfaceMode(t *testing.T) {
	needRoot(t)
	l, err := lab.New(lab.Config{Prefix: "swi", ServerRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := lab.AddAddr(nil, l.ServerIf, netip.PrefixFrom(l.ServerIP, 24)); err != nil {
		t.Fatal(err)
	}
	cfg := quickConfig(t)
	wreck := filepath.Join(t.TempDir(), "wreck")
	if out, err := exec.Command("go", "build", "-o", wreck, filepath.Join(cfg.Root, "cmd", "wreck")).CombinedOutput(); err != nil {
		t.Fatalf("build wreck: %v: %s", err, out)
	}
	cfg.Iface, cfg.ServerAddr = l.ServerIf, l.ServerIP
	cfg.ServerCPUs, cfg.SMPs = []int{runtime.NumCPU() - 1}, []int{1}
	cfg.ClientExec, cfg.ClientThreads = strings.Fields(l.ClientExec()), 1
	cfg.ClientWreck, cfg.ClientWrkScript = wreck, filepath.Join(cfg.Root, "bench", "wrk-pipeline.lua")
	cfg.Servers, cfg.Clients = []string{"native", "posix"}, []string{"wreck", "wrk", "wreck-native"}
	cfg.ClientIface, cfg.ClientAddr = l.ClientIf, lab.Host(l.Subnet, 3)
	cfg.BusyPoll = 64 // veth takes the options; they change nothing there
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if why, ok := res.Skipped["posix"]; ok {
		t.Fatalf("posix skipped: %s", why)
	}
	// veth has no RSS table: wreck-native runs without a port filter.
	if why, ok := res.SkippedClients["wreck-native"]; ok || !res.hasClient("wreck-native") || !strings.Contains(res.Target, "wreck-native without an RSS port filter") {
		t.Errorf("wreck-native on the client's NIC: skipped %q, target %q", why, res.Target)
	}
	// veth has no zero-copy AF_XDP: the report must say copy mode.
	if _, skipped := res.Skipped["native"]; !skipped && (len(res.XDPBind[1]) != 1 || !strings.Contains(res.XDPBind[1][0], "queue 0 bound in copy mode")) {
		t.Errorf("native's bind lines %v do not say copy mode", res.XDPBind)
	}
	if err := res.WriteFiles(nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg.Out)
	if !strings.Contains(string(b), "Network: NIC "+l.ServerIf) || !strings.Contains(string(b), "`--busy-poll 64`") ||
		!strings.Contains(string(b), "by shard count: 1: `queue 0 bound in copy mode") ||
		!strings.Contains(string(b), "- NIC and driver: Seastar drove") || strings.Contains(string(b), "veth pair inside one guest") ||
		!strings.Contains(string(b), "on the server machine only") {
		t.Errorf("report does not describe the NIC setup:\n%s", b)
	}
	checkTables(t, string(b), cfg, res)
}
