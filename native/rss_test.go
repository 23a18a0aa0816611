package native

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"percore/afxdp"
	"percore/lab"
)

func TestAssignQueues(t *testing.T) {
	for _, tc := range []struct {
		queues, shards int
		want           [][]int
	}{
		{2, 2, [][]int{{0}, {1}}},
		{4, 2, [][]int{{0, 2}, {1, 3}}},
		{5, 2, [][]int{{0, 2, 4}, {1, 3}}},
		{40, 8, [][]int{{0, 8, 16, 24, 32}, {1, 9, 17, 25, 33}, {2, 10, 18, 26, 34}, {3, 11, 19, 27, 35},
			{4, 12, 20, 28, 36}, {5, 13, 21, 29, 37}, {6, 14, 22, 30, 38}, {7, 15, 23, 31, 39}}},
	} {
		if got := assignQueues(tc.queues, tc.shards); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d queues, %d shards: %v, want %v", tc.queues, tc.shards, got, tc.want)
		}
	}
}

// The table spreads its entries over queues 0..n-1 with equal weights (a
// size not a multiple of n leaves the first queues one entry more).
func TestEqualTable(t *testing.T) {
	for _, tc := range []struct{ size, queues int }{{128, 2}, {128, 3}, {512, 8}, {64, 1}} {
		tab := equalTable(tc.size, tc.queues)
		if len(tab) != tc.size {
			t.Fatalf("size %d: %d entries", tc.size, len(tab))
		}
		count := make([]int, tc.queues)
		for i, q := range tab {
			if int(q) >= tc.queues {
				t.Fatalf("size %d over %d: entry %d is queue %d", tc.size, tc.queues, i, q)
			}
			count[q]++
		}
		for q, n := range count {
			if n != tc.size/tc.queues && n != tc.size/tc.queues+1 {
				t.Errorf("size %d over %d: queue %d has %d entries", tc.size, tc.queues, q, n)
			}
		}
	}
}

// A table saved before it was changed is found again by the next start
// (a crash left it), until the run that saved it restores it.
func TestRSSLeftover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run") // not there yet: saveTable makes it
	if tab, err := leftover(dir, "eth9"); tab != nil || err != nil {
		t.Fatalf("nothing saved: %v, %v", tab, err)
	}
	orig := []uint32{0, 1, 2, 3, 0, 1, 2, 3}
	if err := saveTable(dir, "eth9", orig); err != nil {
		t.Fatal(err)
	}
	tab, err := leftover(dir, "eth9")
	if err != nil || !reflect.DeepEqual(tab, orig) {
		t.Fatalf("leftover %v, %v; want %v", tab, err, orig)
	}
	if tab, _ := leftover(dir, "eth8"); tab != nil {
		t.Fatalf("another interface's table: %v", tab)
	}
	if err := os.WriteFile(rssSaved(dir, "eth9"), []byte("0 1 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := leftover(dir, "eth9"); err == nil || !strings.Contains(err.Error(), "eth9.rss") {
		t.Fatalf("a damaged file: %v, want an error naming it", err)
	}
}

func TestParseRSS(t *testing.T) {
	for _, r := range []RSS{RSSAuto, RSSIndir, RSSQueues, RSSOff} {
		if got, err := ParseRSS(r.String()); got != r || err != nil {
			t.Errorf("ParseRSS(%q) = %v, %v", r.String(), got, err)
		}
	}
	if _, err := ParseRSS("all"); err == nil {
		t.Error("ParseRSS(all): no error")
	}
}

// veth has no indirection table: programming it fails with
// ErrIndirRefused and leaves no saved table behind; Open then falls back
// to the queues strategy under RSSAuto and refuses under RSSIndir.
func TestRSSOnVeth(t *testing.T) {
	if err := afxdp.Supported(); err != nil {
		t.Skip(err)
	}
	pair, err := lab.NewNativePair(lab.Config{Prefix: "nr", Queues: 4, ServerRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pair.Close() })
	if _, err := getIndir(pair.ServerIf); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("veth's table: %v, want EOPNOTSUPP", err)
	}
	dir := t.TempDir()
	if _, err := programIndir(dir, pair.ServerIf, 2); !errors.Is(err, ErrIndirRefused) {
		t.Fatalf("programIndir: %v, want ErrIndirRefused", err)
	}
	if _, err := os.Stat(rssSaved(dir, pair.ServerIf)); !os.IsNotExist(err) {
		t.Fatalf("a refused table left %s: %v", rssSaved(dir, pair.ServerIf), err)
	}
	c := Config{Iface: pair.ServerIf, Addr: pair.ServerIP, Queues: 2, Logf: t.Logf, rssDir: dir}
	// A table left saved (as by a crash) is restored whatever the strategy:
	// veth takes none, so Open refuses to start.
	if err := saveTable(dir, pair.ServerIf, equalTable(128, 4)); err != nil {
		t.Fatal(err)
	}
	c.RSS = RSSQueues
	if d, err := Open(c); !errors.Is(err, ErrRSSLeftover) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("Open with a leftover table: %v, want ErrRSSLeftover", err)
	}
	os.Remove(rssSaved(dir, pair.ServerIf))
	c.RSS = RSSIndir
	if d, err := Open(c); !errors.Is(err, ErrIndirRefused) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("Open with RSSIndir: %v, want ErrIndirRefused", err)
	}
	for _, tc := range []struct {
		rss  RSS
		want RSS
		own  [][]int
	}{
		{RSSAuto, RSSQueues, [][]int{{0, 2}, {1, 3}}},
		{RSSQueues, RSSQueues, [][]int{{0, 2}, {1, 3}}},
		{RSSOff, RSSOff, [][]int{{0}, {1}}},
	} {
		c.RSS = tc.rss
		d, err := Open(c)
		if err != nil {
			t.Fatalf("Open with %v: %v", tc.rss, err)
		}
		if d.RSS() != tc.want || !reflect.DeepEqual(d.own, tc.own) {
			t.Errorf("%v: strategy %v, queues %v; want %v, %v", tc.rss, d.RSS(), d.own, tc.want, tc.own)
		}
		t.Log(d.Layout())
		if _, err := d.NewQueue(4, QueueConfig{}); !errors.Is(err, afxdp.ErrNoQueue) {
			t.Errorf("queue 4 of 4: %v, want ErrNoQueue", err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
