package server

import (
	"fmt"
	"io"
	"strings"
	"time"

	"percore/shard"
)

// printStats writes one statsLine per interval until stop is closed. The
// reports come from the shards by message (Group.Stats), never by reading
// their memory.
func printStats(w io.Writer, name string, stats func() []shard.Report, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	prev, at := stats(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			cur := stats()
			fmt.Fprintf(w, "%s: %s\n", name, statsLine(prev, cur, now.Sub(at)))
			prev, at = cur, now
		}
	}
}

// shardNumbers are the figures of the stats line for one shard.
type shardNumbers struct {
	requests, open, drops, errors uint64
}

// numbers reads a report of either stack: requests served, connections open,
// and the counters that declare themselves drops (frames, segments or
// connections lost) and errors.
func numbers(r shard.Report) shardNumbers {
	return shardNumbers{
		requests: r.Get("http.requests"),
		open:     r.Get("native.open") + r.Get("posix.open"),
		drops:    r.Sum(shard.Drop),
		errors:   r.Sum(shard.Error),
	}
}

// statsLine formats requests/s, open connections and drops (cumulative),
// total then per shard, from two successive sets of reports dt apart:
//
//	stats: 61234 req/s, 64 open, 0 drops, 0 errors | s0 30100 req/s 32 open 0 drops 0 errors | s1 ...
func statsLine(prev, cur []shard.Report, dt time.Duration) string {
	before := map[int]shardNumbers{}
	for _, r := range prev {
		before[r.Shard] = numbers(r)
	}
	var b strings.Builder
	var total shardNumbers
	var rate float64
	per := make([]string, 0, len(cur))
	for _, r := range cur {
		n := numbers(r)
		d := n.requests - min(before[r.Shard].requests, n.requests)
		rs := float64(d) / dt.Seconds()
		rate += rs
		total.open += n.open
		total.drops += n.drops
		total.errors += n.errors
		per = append(per, fmt.Sprintf("s%d %.0f req/s %d open %d drops %d errors", r.Shard, rs, n.open, n.drops, n.errors))
	}
	fmt.Fprintf(&b, "stats: %.0f req/s, %d open, %d drops, %d errors", rate, total.open, total.drops, total.errors)
	for _, p := range per {
		b.WriteString(" | ")
		b.WriteString(p)
	}
	return b.String()
}
