package wreck

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"percore/lab"
	"percore/netstack"
)

// TestNativeSeveralQueuesPerShard: native wreck with two shards on a client
// end with six queues and no RSS table (veth), so each shard runs a stack
// on each of three queues (i, i+2, i+4) as the server does. With and
// without an RSS key to filter the source ports by, the connections are
// dealt over all of each shard's stacks, every one of them opens some, and
// every request is answered. veth brings each reply back on the queue its
// request left from, so this does not show that the NIC's hash puts it
// there: only a NIC with RSS does (TestRSSPortFilter checks the hash).
func TestNativeSeveralQueuesPerShard(t *testing.T) {
	requireNative(t)
	cpus := twoCPUs(t)
	const queues = 6
	pair := newNativePair(t, lab.Config{Prefix: "wq6", Queues: queues, ServerRoot: true})
	srv := startNativeServer(t, pair.Lab, cpus)
	var key []string
	for _, b := range msKey {
		key = append(key, fmt.Sprintf("%02x", b))
	}
	line := regexp.MustCompile(`wreck: native shard (\d+) \(queue (-?\d+)\): .* tcp (\d+) connects`)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		// Apart source ports: a server in TIME-WAIT on a 4-tuple does not
		// take a new connection on it.
		{"no key", []string{"--source-ports", "32768-45999"}},
		{"rss key", []string{"--source-ports", "46000-60999", "--rss-key", strings.Join(key, ":"), "--rss-table", "128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := lockedLog{t: t}
			before := accepted(srv)
			res := nativeRunTo(t, pair, srv, cpus, &out, append(tc.extra, "--keepalive=false", "--reqs", "2000")...)
			checkRun(t, res, 2000, srv, before)
			connects := map[int]uint64{} // rx queue -> connections its stack opened
			for _, m := range line.FindAllStringSubmatch(out.String(), -1) {
				sh, _ := strconv.Atoi(m[1])
				q, _ := strconv.Atoi(m[2])
				n, _ := strconv.ParseUint(m[3], 10, 64)
				if q%2 != sh {
					t.Errorf("shard %d ran a stack on queue %d, want queues %d, %d, %d", sh, q, sh, sh+2, sh+4)
				}
				connects[q] = n
			}
			for q := range queues {
				if connects[q] == 0 {
					t.Errorf("connections per queue %v: queue %d's stack opened none", connects, q)
				}
			}
		})
	}
}

// lockedLog keeps what the shards write to it, and logs it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
	t  *testing.T
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStackPorts: with a key each of a shard's stacks takes the whole range
// and keeps the ports whose replies hash to its queue; without one, the
// shard's slice of the range is cut into disjoint slices, one a stack.
func TestStackPorts(t *testing.T) {
	server := netip.MustParseAddrPort("198.18.0.1:80")
	n := &NativeConfig{Addr: netip.MustParseAddr("198.18.0.3"), PortLo: 32768, PortHi: 32768 + 1199}
	rss := rssSpread{key: msKey, table: 128, queues: 6}
	for j, q := range []int{1, 3, 5} { // shard 1 of 2
		var tc netstack.TCPConfig
		if err := stackPorts(n, rss, 1, 2, j, 3, q, server, &tc); err != nil {
			t.Fatal(err)
		}
		if tc.PortLo != n.PortLo || tc.PortHi != n.PortHi || tc.PortFilter == nil {
			t.Fatalf("queue %d: ports %d-%d, filter %v: want the whole range, filtered", q, tc.PortLo, tc.PortHi, tc.PortFilter != nil)
		}
		kept := 0
		for p := int(tc.PortLo); p <= int(tc.PortHi); p++ {
			if tc.PortFilter(uint16(p)) {
				kept++
				if got := rssQueue(msKey, 128, 6, server, netip.AddrPortFrom(n.Addr, uint16(p))); got != q {
					t.Fatalf("queue %d keeps port %d, whose replies hash to queue %d", q, p, got)
				}
			}
		}
		if kept == 0 {
			t.Errorf("queue %d keeps no port", q)
		}
	}
	var prev uint16
	for j := range 3 {
		var tc netstack.TCPConfig
		if err := stackPorts(n, rssSpread{}, 1, 2, j, 3, 1+2*j, server, &tc); err != nil {
			t.Fatal(err)
		}
		if tc.PortFilter != nil || tc.PortLo < 32768+600 || tc.PortHi > n.PortHi || tc.PortLo > tc.PortHi || (j > 0 && tc.PortLo <= prev) {
			t.Errorf("stack %d without a key: ports %d-%d (filter %v): want a slice of shard 1's 33368-33967 after %d",
				j, tc.PortLo, tc.PortHi, tc.PortFilter != nil, prev)
		}
		prev = tc.PortHi
	}
	small := &NativeConfig{Addr: n.Addr, PortLo: 40000, PortHi: 40003}
	var tc netstack.TCPConfig
	if err := stackPorts(small, rssSpread{}, 0, 2, 0, 3, 0, server, &tc); err == nil {
		t.Errorf("4 ports for 2 shards of 3 stacks: no error")
	}
}
