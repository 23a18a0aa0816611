package server

import (
	"flag"
	"fmt"
	"net/http"
	"testing"
	"time"

	"percore/shard"
)

// TestNativeImpairedBulk fetches a 16 MiB file over the native stack through
// the lab's impairment bridge (loss 5%, reordering 10%, duplication 1%,
// corruption 0.1%, delay 1 ms) for two seeds, byte-exact by sha256, and
// checks that the TCP layer repaired the losses mostly by SACK recovery:
// fast retransmits outnumber retransmission timeouts more than tenfold
// (about 70 to 1 measured; before the netstack's lost-retransmission
// check, recovery probe and window-blind duplicate ACKs it was about 8 to
// 1, and the transfer ran at half the speed).
//
// With -long (a soak, not in CI: about a minute per seed) the file is 64 MiB,
// the largest body of issue 4's transfers.
func TestNativeImpairedBulk(t *testing.T) {
	name, size, limit := "m16.bin", 16<<20, 90*time.Second
	if *long {
		name, size, limit = "m64.bin", 64<<20, 5*time.Minute
	}
	for _, seed := range []int{1, 2} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			spec := fmt.Sprintf("loss=5%%,reorder=10%%,duplicate=1%%,corrupt=0.1%%,delay=1ms,seed=%d", seed)
			nt := startNativeTest(t, 2, []docrootFile{{name, size}}, spec, nil)
			tr := &http.Transport{DialContext: nt.dial.DialContext}
			t.Cleanup(tr.CloseIdleConnections)
			c := &http.Client{Transport: tr, Timeout: limit}
			start := time.Now()
			code, sum, n := getNoFatal(c, nt.url+"/"+name)
			el := time.Since(start)
			m := shard.Merge(nt.Stats())
			if code != 200 || sum != nt.sums[name] {
				t.Fatalf("GET /%s after %v: status %d, %d bytes, sha256 %s, want 200 and %s\ncounters: %v", name, el, code, n, sum, nt.sums[name], m)
			}
			fast, rto := m.Get("tcp.fast_retransmits"), m.Get("tcp.rto_timeouts")
			t.Logf("%d MiB in %v (%.2f MB/s): retransmits %d, fast %d, lost retransmits %d, recovery probes %d, tail loss probes %d, rto %d",
				size>>20, el.Round(time.Millisecond), float64(n)/el.Seconds()/1e6, m.Get("tcp.retransmits"), fast,
				m.Get("tcp.lost_retransmits"), m.Get("tcp.recovery_probes"), m.Get("tcp.tail_loss_probes"), rto)
			if fast == 0 || rto*10 >= fast {
				t.Errorf("RTO-bound recovery: %d fast retransmits, %d RTOs", fast, rto)
			}
		})
	}
}

// long enables the soaks that CI does not run.
var long = flag.Bool("long", false, "run the long soaks (a 64 MiB transfer through the impairment)")
