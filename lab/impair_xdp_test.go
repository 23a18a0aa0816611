package lab

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// TestImpairXDPTx checks that frames an XDP program on the server end sends
// back out (XDP_TX) cross the bridge, thanks to the XDP_PASS program on the
// middle end, and that without that program the server end drops them.
func TestImpairXDPTx(t *testing.T) {
	needRoot(t)
	im, err := NewImpaired(Config{Queues: 2}, ImpairSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	bounce, err := attachXDP(im.ServerNS, im.ServerIf, xdpTx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bounce.Close() })

	// rx sees the bounced test frames arriving back at the client end.
	rx := clientTestSocket(t, im)

	const n = 32
	sendTestFrames(t, im, rx, 0, n)
	seen := make([]bool, n)
	buf := make([]byte, 2048)
	for range n {
		m, err := unix.Read(rx, buf) // SO_RCVTIMEO bounds the wait
		if err != nil {
			t.Fatalf("waiting for bounced frames: %v (seen %v)\n%v", err, seen, im.Bridge.Stats())
		}
		seq := binary.BigEndian.Uint32(buf[14:])
		if m < 18 || seq >= n || seen[seq] {
			t.Fatalf("unexpected frame %x", buf[:m])
		}
		seen[seq] = true
	}

	// Without a program on the middle end, XDP_TX has nowhere to go.
	before := xdpTxErrors(t, im.ServerNS, im.ServerIf)
	if err := im.xdpPass[1].Close(); err != nil {
		t.Fatal(err)
	}
	sendTestFrames(t, im, rx, n, n)
	end := time.Now().Add(5 * time.Second)
	for xdpTxErrors(t, im.ServerNS, im.ServerIf)-before < n {
		if time.Now().After(end) {
			t.Fatalf("server end counted %d xdp_tx_errors of %d frames without a peer program", xdpTxErrors(t, im.ServerNS, im.ServerIf)-before, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m, _, err := unix.Recvfrom(rx, buf, unix.MSG_DONTWAIT); err == nil {
		t.Fatalf("frame %x crossed without a peer program", buf[:m])
	}
}

// xdpTxErrors sums a veth end's per-queue xdp_tx_errors (ethtool -S).
func xdpTxErrors(t *testing.T, ns *NS, name string) uint64 {
	t.Helper()
	var sum uint64
	for k, v := range ethtoolStats(t, ns, name) {
		if strings.HasPrefix(k, "rx_queue_") && strings.HasSuffix(k, "_xdp_tx_errors") {
			sum += v
		}
	}
	return sum
}

// ethtoolStats reads a veth end's counters (ethtool -S).
func ethtoolStats(t *testing.T, ns *NS, name string) map[string]uint64 {
	t.Helper()
	var st map[string]uint64
	if err := ns.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		st, err = e.Stats(name)
		return err
	}); err != nil {
		t.Fatalf("ethtool -S %s: %v", name, err)
	}
	return st
}

// TestImpairedSpreadsFlows checks that flows through the bridge reach more
// than one rx queue of the server end: the middle kernel picks the tx queue
// of each frame the bridge sends by the flow's hash.
func TestImpairedSpreadsFlows(t *testing.T) {
	im, ln := newImpairedTCP(t, ImpairSpec{})
	// An XDP program on the server end makes veth count frames per rx queue.
	x, err := attachXDP(im.ServerNS, im.ServerIf, xdpPass)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	const flows = 32 // all on one queue of two: 2^-31 for a fair hash
	if err := im.ClientNS.Do(func() error {
		for range flows {
			d := net.Dialer{Timeout: 5 * time.Second}
			c, err := d.Dial("tcp4", ln.Addr().String())
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	per := xdpPacketsPerQueue(t, im.ServerNS, im.ServerIf)
	t.Logf("server end rx frames per queue: %v", per)
	if len(per) != 2 || per[0] == 0 || per[1] == 0 {
		t.Fatalf("rx frames per queue %v: want frames on both queues", per)
	}
}

// xdpPacketsPerQueue reads a veth end's rx_queue_N_xdp_packets (ethtool -S).
func xdpPacketsPerQueue(t *testing.T, ns *NS, name string) []uint64 {
	t.Helper()
	st := ethtoolStats(t, ns, name)
	var per []uint64
	for q := 0; ; q++ {
		v, ok := st[fmt.Sprintf("rx_queue_%d_xdp_packets", q)]
		if !ok {
			return per
		}
		per = append(per, v)
	}
}
