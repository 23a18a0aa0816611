package native

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/lab"
	"percore/netstack"
	"percore/shard"
)

// newPair builds a one-queue lab whose server end (no kernel address) is in
// the root namespace; it skips without root or AF_XDP.
func newPair(t *testing.T, prefix string) *lab.NativePair {
	t.Helper()
	if err := afxdp.Supported(); err != nil {
		t.Skip(err)
	}
	pair, err := lab.NewNativePair(lab.Config{Prefix: prefix, Queues: 1, ServerRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pair.Close(); err != nil {
			t.Errorf("remove lab: %v", err)
		}
	})
	return pair
}

// Open refuses, with its sentinel, what the native stack cannot run on, and
// attaches nothing when it does.
func TestOpenChecks(t *testing.T) {
	pair := newPair(t, "nc")
	server := Config{Iface: pair.ServerIf, Addr: pair.ServerIP}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want error
	}{
		{"no interface", func(c *Config) { c.Iface = "nosuch0" }, ErrNoIface},
		{"no namespace", func(c *Config) { c.Netns = "nosuch-netns" }, ErrNoNetns},
		{"kernel address", func(c *Config) {
			c.Iface, c.Netns, c.Addr = pair.ClientIf, pair.ClientNS.Name, pair.ClientIP
			c.PortLo, c.PortHi = 40000, 40999
		}, ErrKernelAddr},
		{"too few queues", func(c *Config) { c.Queues, c.RSS = 2, RSSQueues }, ErrTooFewQueues},
		{"small MTU", func(c *Config) { c.MTU = 500 }, ErrMTU},
	} {
		c := server
		tc.edit(&c)
		d, err := Open(c)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Open: %v, want %v", tc.name, err, tc.want)
		}
		if d != nil {
			d.Close()
		}
	}
	// The namespace's interface, with an address no kernel interface has.
	d, err := Open(Config{Iface: pair.ClientIf, Netns: pair.ClientNS.Name, Addr: pair.ClientNativeIP, PortLo: 40000, PortHi: 40999})
	if err != nil {
		t.Fatalf("Open in the client namespace: %v", err)
	}
	if d.MTU() != 1500 || d.MAC() != netstack.MAC(pair.ClientMAC) {
		t.Errorf("MTU %d, MAC %v; want 1500, %v", d.MTU(), d.MAC(), pair.ClientMAC)
	}
	if d.allTCP {
		t.Error("a client port range took every TCP port of its address")
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
	// A server on an address the kernel holds leaves the kernel its other ports.
	d, err = Open(Config{Iface: pair.ClientIf, Netns: pair.ClientNS.Name, Addr: pair.ClientIP, Ports: []uint16{8080}})
	if err != nil {
		t.Fatalf("Open a server on a kernel address: %v", err)
	}
	if d.allTCP || !strings.Contains(d.Layout(), "closed ports left to the kernel") {
		t.Errorf("server on a kernel address: allTCP %v, layout %q", d.allTCP, d.Layout())
	}
	if err := d.Close(); err != nil {
		t.Error(err)
	}
}

// echo is a TCP app that sends back what it is fed.
type echo struct{ out []byte }

func (e *echo) Feed(p []byte, now time.Time) int { e.out = append(e.out, p...); return len(p) }
func (e *echo) Output() [][]byte {
	if len(e.out) == 0 {
		return nil
	}
	return [][]byte{e.out}
}
func (e *echo) Advance(n int)            { e.out = e.out[n:] }
func (e *echo) Closing() bool            { return false }
func (e *echo) PeerClosed(now time.Time) {}

type echoEP struct{}

func (echoEP) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp { return &echo{} }
func (echoEP) Release(netstack.TCPApp, time.Time)                                   {}

// counter is an App that counts its calls.
type counter struct{ before, after uint64 }

func (c *counter) Before(time.Time)     { c.before++ }
func (c *counter) After(time.Time) bool { c.after++; return false }

// queueOwner reports a queue's counters and closes it when the shard stops.
type queueOwner struct {
	q      *Queue
	app    *counter
	closed chan int // the stack's held tx frames after Close
}

func (o *queueOwner) Report(r *shard.Report) {
	r.Add("wakeups", o.q.Stats().Wakeups)
	r.Add("before", o.app.before)
	r.Add("after", o.app.after)
}
func (o *queueOwner) Drain(time.Time) {}
func (o *queueOwner) Drained() bool   { return true }
func (o *queueOwner) Close() {
	o.q.Close()
	o.closed <- o.q.Stack().HeldTx()
}

// A queue registered with a shard serves a kernel TCP client from the
// client namespace: the socket wakes the sleeping shard, the App runs around
// each Poll, the MSS fits the MTU given, and Close gives every frame back.
func TestQueueOnShard(t *testing.T) {
	pair := newPair(t, "nq")
	const mtu = 1400
	d, err := Open(Config{Iface: pair.ServerIf, Addr: pair.ServerIP, MTU: mtu, Ports: []uint16{8080}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cpus, err := shard.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	own := &queueOwner{app: &counter{}, closed: make(chan int, 1)}
	g, err := shard.Start(shard.Config{CPUs: cpus[:1]}, func(sh *shard.Shard) error {
		q, err := d.NewQueue(sh.ID, QueueConfig{TCP: netstack.TCPConfig{Seed: 1}, App: own.app})
		if err != nil {
			return err
		}
		own.q = q
		sh.AddStopper(own)
		sh.AddReporter(own)
		if err := q.Stack().ListenTCP(8080, echoEP{}); err != nil {
			return err
		}
		return q.Register(sh)
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			g.Stop()
			g.Wait()
		}
	}
	defer stop()
	// The shard starts with nothing to do and no timer: once it has blocked
	// (under load it may get there late), only the client's first frame
	// (ARP, then the SYN) can wake it, through the socket.
	for deadline := time.Now().Add(5 * time.Second); g.Stats()[0].Loop.Sleeps == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle shard never blocked")
		}
	}

	var c net.Conn
	err = pair.ClientNS.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(pair.ServerIP, 8080).String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	exchange := func(msg string) {
		t.Helper()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v; want %q", got, err, msg)
		}
	}
	exchange("hello")
	exchange("again")
	// The address is ours alone: a closed port answers the SYN with a RST.
	if !strings.Contains(d.Layout(), "closed ports answered with RST") {
		t.Errorf("layout %q does not say closed ports get a RST", d.Layout())
	}
	err = pair.ClientNS.Do(func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(pair.ServerIP, 8081).String(), 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("dial a closed port: %v, want connection refused", err)
	}
	exchange("still")
	r := g.Stats()[0]
	if r.Loop.Sleeps == 0 || r.Get("wakeups") == 0 {
		t.Errorf("%d sleeps, %d socket wake-ups: want both", r.Loop.Sleeps, r.Get("wakeups"))
	}
	if r.Get("before") == 0 || r.Get("before") != r.Get("after") {
		t.Errorf("App ran %d times before and %d after the Poll, want as many, more than 0", r.Get("before"), r.Get("after"))
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mss int
	raw.Control(func(fd uintptr) { mss, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
	if mss > mtu-40 || mss < mtu-40-40 {
		t.Errorf("the client sends segments of %d bytes, want the MSS of MTU %d less 40, less options", mss, mtu)
	}
	t.Logf("client MSS %d; report %v", mss, r)
	stop()
	if held := <-own.closed; held != 0 {
		t.Errorf("the stack holds %d tx frames after Close, want 0", held)
	}
}

// The queue's counters declare their kind.
func TestQueueStatsDeclareKind(t *testing.T) {
	if err := shard.CheckFields(QueueStats{}); err != nil {
		t.Fatal(err)
	}
}
