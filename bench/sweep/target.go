package sweep

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"percore/lab"
)

// target is where one shard count's servers run and where their clients
// come from: a fresh lab (its own veth pair with as many queues as shards,
// so the client's flows spread over exactly the queues the native shards
// own), or a real NIC with a remote client.
type target struct {
	serverIP   netip.Addr
	iface      string   // for --network-stack native
	serverPre  []string // argv prefix that runs a command where the servers live
	clientPre  []string // argv prefix that runs a client
	serverCPUs []int
	clientCPUs []int  // local CPUs for the client (lab only; nil on bare metal)
	threads    int    // client threads: wrk -t, wreck --smp
	wreck      string // wreck's path where the client runs
	queues     int    // lab queues on each end (lab only)
	rssKey     string // the client NIC's RSS key for wreck-native (bare metal only)
	rssTable   int    // and its indirection table's size
	describe   string
	lab        *lab.Lab
}

// newLabTarget builds a lab with smp queues. The server end lives in its own
// namespace with the server address on it, so kernel-stack servers answer
// there, while the native stack's XDP program takes the frames for its own
// port before the kernel sees them. Servers take the last smp CPUs and the
// client the others; at smp == NumCPU they share every CPU.
func newLabTarget(smp int) (*target, error) {
	l, err := lab.New(lab.Config{Prefix: "sw", Queues: smp})
	if err != nil {
		return nil, fmt.Errorf("build lab with %d queues: %w", smp, err)
	}
	if err := lab.AddAddr(l.ServerNS, l.ServerIf, netip.PrefixFrom(l.ServerIP, 24)); err != nil {
		l.Close()
		return nil, fmt.Errorf("address the lab's server end: %w", err)
	}
	n := runtime.NumCPU()
	t := &target{
		serverIP: l.ServerIP, iface: l.ServerIf,
		serverPre: []string{"ip", "netns", "exec", l.ServerNS.Name},
		clientPre: []string{"ip", "netns", "exec", l.ClientNS.Name},
		lab:       l, queues: smp,
	}
	t.serverCPUs = seq(n-smp, n-1)
	t.clientCPUs = seq(0, n-smp-1)
	if len(t.clientCPUs) == 0 {
		t.clientCPUs = seq(0, n-1)
	}
	t.threads = len(t.clientCPUs)
	t.describe = l.String()
	return t, nil
}

// newIfaceTarget serves on a real NIC; the client machine is reached through
// cfg.ClientExec. With SetChannels the NIC gets exactly smp combined queues.
// The servers take the first smp of cfg.ServerCPUs (physical cores first),
// in ascending order as httpd's --cpuset does: shard q on the q-th.
func newIfaceTarget(cfg *Config, smp int) (*target, error) {
	cpus := slices.Sorted(slices.Values(cfg.ServerCPUs[:smp]))
	if cfg.SetChannels {
		// A table someone set (`ethtool -X`) keeps the channel count from
		// shrinking below the queues it names: the driver's own first.
		xout, _ := exec.Command("ethtool", "-X", cfg.Iface, "default").CombinedOutput()
		out, err := exec.Command("ethtool", "-L", cfg.Iface, "combined", strconv.Itoa(smp)).CombinedOutput()
		// ethtool exits 80 when the count is already set.
		if err != nil && !strings.Contains(string(out), "unmodified") {
			return nil, fmt.Errorf("ethtool -L %s combined %d: %v: %s (ethtool -X %s default said: %q)", cfg.Iface, smp, err, strings.TrimSpace(string(out)), cfg.Iface, strings.TrimSpace(string(xout)))
		}
	}
	if cfg.IRQAffinity {
		if _, err := pinQueueIRQs(cfg.Iface, cpus); err != nil {
			return nil, err
		}
	}
	t := &target{
		serverIP: cfg.ServerAddr, iface: cfg.Iface,
		clientPre: cfg.ClientExec, serverCPUs: cpus,
		threads: cfg.ClientThreads, wreck: cfg.ClientWreck,
		describe: fmt.Sprintf("NIC %s, server %s, client via %q", cfg.Iface, cfg.ServerAddr, strings.Join(cfg.ClientExec, " ")),
	}
	if slices.Contains(cfg.Clients, "wreck-native") {
		argv := append(slices.Clone(cfg.ClientExec), "ethtool", "-x", cfg.ClientIface)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := runClient(ctx, argv)
		cancel()
		if err == nil {
			t.rssKey, t.rssTable, err = ParseEthtoolX(string(out))
		}
		if err != nil {
			// A NIC without a table (veth) sends each reply to the queue
			// its flow left from: no filter needed. One that has a table
			// but would not say gets misrouted replies, and the report
			// says why wreck-native failed.
			t.describe += fmt.Sprintf("; wreck-native without an RSS port filter (%s: %v)", strings.Join(argv, " "), err)
		}
	}
	return t, nil
}

func (t *target) close() error {
	if t.lab != nil {
		return t.lab.Close()
	}
	return nil
}

// ready waits until GET / on port answers 200 from the client's side, the
// process stays up, and ctx allows.
func (t *target) ready(ctx context.Context, p *proc, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited at start: %s", p.name, p.tail())
		}
		if err = t.probe(ctx, port); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer GET / on %s:%d within %v (%v): %s", p.name, t.serverIP, port, limit, err, p.tail())
}

// probe makes one GET / from the client side: from inside the client
// namespace in the lab, with one wreck request on the client machine on bare
// metal (so that machine needs nothing but wreck and wrk).
func (t *target) probe(ctx context.Context, port int) error {
	addr := netip.AddrPortFrom(t.serverIP, uint16(port)).String()
	if t.lab == nil {
		argv := append(append([]string{}, t.clientPre...), t.wreck, "--server", addr, "--conn", "1", "--reqs", "1", "--duration", "2s", "--json")
		out, err := runClient(ctx, argv)
		if err != nil {
			return err
		}
		s, err := ParseWreck(out)
		if err == nil && (s.Requests == 0 || s.Errors > 0) {
			err = fmt.Errorf("GET / got %d responses, %d errors", s.Requests, s.Errors)
		}
		return err
	}
	return t.lab.ClientNS.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: sweep\r\nConnection: close\r\n\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "HTTP/1.1 200") {
			return fmt.Errorf("status line %q", strings.TrimSpace(line))
		}
		return nil
	})
}

// cpuList formats CPUs as a comma list for --cpuset and taskset.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
