package lab

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newImpairedTCP builds an impaired lab whose server end is a plain kernel
// TCP endpoint (address, offloads off) and returns it with a listener in the
// server namespace. Everything goes away in t.Cleanup.
func newImpairedTCP(t testing.TB, spec ImpairSpec) (*Impaired, net.Listener) {
	t.Helper()
	needRoot(t)
	im, err := NewImpaired(Config{Queues: 2}, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := im.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, ns := range []*NS{im.ClientNS, im.ServerNS, im.MiddleNS} {
			if _, err := os.Stat(netnsDir + "/" + ns.Name); !os.IsNotExist(err) {
				t.Errorf("netns %s left behind (%v)", ns.Name, err)
			}
		}
	})
	t.Log(im)
	if err := DisableOffloads(im.ServerNS, im.ServerIf); err != nil {
		t.Fatal(err)
	}
	if err := AddAddr(im.ServerNS, im.ServerIf, netip.PrefixFrom(im.ServerIP, 24)); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := im.ServerNS.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(im.ServerIP, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return im, ln
}

// transfer sends size seeded bytes from the server to the client through the
// lab and checks that the client got them exactly. deadline bounds the whole
// transfer so that a broken bridge fails the test instead of hanging it.
func transfer(t *testing.T, im *Impaired, ln net.Listener, size int, deadline time.Duration) {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	want := sha256.Sum256(data)
	end := time.Now().Add(deadline)
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		c.SetDeadline(end)
		_, err = c.Write(data)
		served <- err
	}()
	var c net.Conn
	if err := im.ClientNS.Do(func() (err error) {
		d := net.Dialer{Deadline: end}
		c, err = d.Dial("tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatalf("dial through the bridge: %v", err)
	}
	defer c.Close()
	c.SetDeadline(end)
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		t.Fatalf("after %d of %d bytes: %v\n%v", n, size, err, im.Bridge.Stats())
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	if got := h.Sum(nil); n != int64(size) || !bytes.Equal(got, want[:]) {
		t.Fatalf("client got %d bytes, sha256 %x; want %d, %x", n, got, size, want)
	}
}

// TestImpairedTCP sends 4 MiB with kernel TCP from the server to the client
// through the bridge with every impairment on, for a few seeds, and checks
// that the bytes arrive intact and that the bridge did what it was asked.
func TestImpairedTCP(t *testing.T) {
	needRoot(t)
	var corrupted uint64
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			spec, err := ParseImpair(fmt.Sprintf("loss=5%%,reorder=10%%,duplicate=1%%,corrupt=0.1%%,delay=1ms,seed=%d", seed))
			if err != nil {
				t.Fatal(err)
			}
			im, ln := newImpairedTCP(t, spec)
			transfer(t, im, ln, 4<<20, 60*time.Second)
			toServer, toClient := im.Stats()
			caught := badFrames(t, im.ClientNS)
			t.Logf("to server: %+v", toServer)
			t.Logf("to client: %+v", toClient)
			// The data frames alone are about 2900: enough that each of these
			// must have happened (the chance of none is below 1e-20 for loss and
			// reorder, 1e-12 for duplicates).
			for _, c := range []struct {
				name string
				n    uint64
			}{
				{"dropped", toClient.Dropped}, {"reordered", toClient.Reordered},
				{"duplicated", toClient.Duplicated}, {"delayed", toClient.Delayed},
				{"dropped to server", toServer.Dropped}, {"delayed to server", toServer.Delayed},
			} {
				if c.n == 0 {
					t.Errorf("nothing %s", c.name)
				}
			}
			for _, s := range []ImpairStats{toServer, toClient} {
				if s.TooLong != 0 || s.SendErrors != 0 {
					t.Errorf("frames lost by the bridge itself: %+v", s)
				}
				if s.Delayed != s.Received-s.Dropped {
					t.Errorf("delayed %d of %d kept frames", s.Delayed, s.Received-s.Dropped)
				}
			}
			// Every corrupted frame (IPv4 only) must reach the client's kernel
			// and be refused by a checksum or header check (a duplicate of a
			// corrupted frame carries the same flip, so there may be more).
			t.Logf("client kernel refused %d frames; bridge corrupted %d", caught, toClient.Corrupted)
			if caught < toClient.Corrupted {
				t.Errorf("client kernel refused %d frames, bridge corrupted %d", caught, toClient.Corrupted)
			}
			corrupted += toServer.Corrupted + toClient.Corrupted
		})
	}
	// At 0.1% one seed may corrupt nothing (about 2% likely); all three
	// together corrupting nothing is about 1e-5 likely.
	if corrupted == 0 {
		t.Error("no frame corrupted over all seeds")
	}
}

// badFrames sums the IPv4 and TCP counters of frames that a namespace's kernel
// refused for a bad checksum or header (/proc/net/snmp as seen from inside).
func badFrames(t *testing.T, ns *NS) uint64 {
	t.Helper()
	var snmp []byte
	if err := ns.Do(func() (err error) {
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Lines come in pairs: "Ip: Forwarding DefaultTTL ..." then "Ip: 1 64 ...".
	lines := strings.Split(string(snmp), "\n")
	var sum uint64
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) != len(vals) || len(names) == 0 {
			t.Fatalf("cannot read /proc/net/snmp near %q", lines[i])
		}
		for j, n := range names {
			switch names[0] + n {
			case "Ip:InHdrErrors", "Ip:InTruncatedPkts", "Ip:InAddrErrors", "Tcp:InCsumErrors":
				v, err := strconv.ParseUint(vals[j], 10, 64)
				if err != nil {
					t.Fatalf("snmp %s%s=%q: %v", names[0], n, vals[j], err)
				}
				sum += v
			}
		}
	}
	return sum
}

// TestImpairedFailureCleansUp makes NewImpaired fail after it has made its
// namespaces and checks that nothing is left behind.
func TestImpairedFailureCleansUp(t *testing.T) {
	needRoot(t)
	next := uint32(os.Getpid())*131 + counter.Load() + 1 // the id NewImpaired will take
	_, err := NewImpaired(Config{Prefix: "pf", MTU: MaxXDPMTU + 1}, ImpairSpec{})
	if err == nil || !strings.Contains(err.Error(), "mtu") {
		t.Fatalf("NewImpaired with an oversize MTU: %v, want an mtu error", err)
	}
	for _, sfx := range []string{"-cli", "-srv", "-mid"} {
		name := Name("pf", next, sfx)
		if _, err := os.Stat(netnsDir + "/" + name); !os.IsNotExist(err) {
			t.Errorf("netns %s left behind after a failed NewImpaired (%v)", name, err)
		}
	}
	// The names checked were the ones used: the next lab takes the next id.
	im, err := NewImpaired(Config{Prefix: "pf"}, ImpairSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if im.ID != next+1 {
		t.Fatalf("failed lab had id %x? next lab got %x, want %x", next, im.ID, next+1)
	}
}

// TestImpairedServerRoot puts the server end in the root namespace and checks
// that Close takes it away.
func TestImpairedServerRoot(t *testing.T) {
	needRoot(t)
	im, err := NewImpaired(Config{ServerRoot: true}, ImpairSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	if _, err := net.InterfaceByName(im.ServerIf); err != nil {
		t.Fatalf("server end not in root: %v", err)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(im.ServerIf); err == nil {
		t.Errorf("server end %s left in root", im.ServerIf)
	}
}
