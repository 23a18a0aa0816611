package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"percore/shard"
)

// TestNativeImpaired runs the core checks through the lab's impairment bridge
// (loss 5%, reordering 10%, duplication 1%, corruption 0.1%, delay 1 ms) with
// two seeds: hello over keep-alive and files up to 1 MiB over fresh
// connections from 4 clients at once, and with the first seed a 16 MiB file
// beside them, all byte-exact by sha256. Across both runs the stack must have
// retransmitted and dropped corrupted packets on their checksum.
func TestNativeImpaired(t *testing.T) {
	var retransmits, csumDrops uint64
	for _, seed := range []int{1, 2} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			spec := fmt.Sprintf("loss=5%%,reorder=10%%,duplicate=1%%,corrupt=0.1%%,delay=1ms,seed=%d", seed)
			files := smallFiles
			if seed == 1 {
				files = append(files, docrootFile{"m16.bin", 16 << 20})
			}
			nt := startNativeTest(t, 2, files, spec, nil)
			for i := 0; i < 20; i++ {
				if code, _, n := get(t, nt.client, nt.url+"/"); code != 200 || n == 0 {
					t.Fatalf("GET /: %d, %d bytes", code, n)
				}
			}
			fresh := nt.httpClient(false)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, f := range []string{"b1.bin", "k1.bin", "m1.bin"} {
						code, sum, n := getNoFatal(fresh, nt.url+"/"+f)
						if code != 200 || sum != nt.sums[f] {
							errs <- fmt.Errorf("GET /%s: status %d, %d bytes, sha256 mismatch", f, code, n)
							return
						}
					}
				}()
			}
			start := time.Now()
			if seed == 1 {
				big := nt.httpClient(true)
				big.Timeout = 90 * time.Second // about 1 MB/s through 5% loss here
				if code, sum, n := getNoFatal(big, nt.url+"/m16.bin"); code != 200 || sum != nt.sums["m16.bin"] {
					errs <- fmt.Errorf("GET /m16.bin: status %d, %d bytes, %s", code, n, sum)
				}
				t.Logf("16 MiB beside them in %v", time.Since(start))
			}
			wg.Wait()
			t.Logf("4 clients x (1 B, 1 KiB, 1 MiB) in %v", time.Since(start))
			close(errs)
			m := shard.Merge(nt.Stats())
			defer func() {
				if t.Failed() {
					t.Logf("counters: %v", m)
				}
			}()
			for err := range errs {
				t.Fatal(err)
			}
			toServer, toClient := nt.Impaired.Stats()
			t.Logf("impairment to server %+v, to client %+v", toServer, toClient)
			t.Logf("tcp retransmits %d (fast %d, rto %d), checksum drops tcp %d ip %d, ooo %d, dup %d",
				m.Get("tcp.retransmits"), m.Get("tcp.fast_retransmits"), m.Get("tcp.rto_timeouts"),
				m.Get("tcp.checksum_drop"), m.Get("ip.ipv4_bad_checksum"), m.Get("tcp.ooo_segs"), m.Get("tcp.dup_segs"))
			retransmits += m.Get("tcp.retransmits")
			csumDrops += m.Get("tcp.checksum_drop") + m.Get("ip.ipv4_bad_checksum")
		})
	}
	if t.Failed() {
		return
	}
	if retransmits == 0 || csumDrops == 0 {
		t.Fatalf("through 5%% loss and 0.1%% corruption: %d retransmits, %d checksum drops; want both > 0", retransmits, csumDrops)
	}
}
