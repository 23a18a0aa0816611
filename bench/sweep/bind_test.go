package sweep

import "testing"

// TestBindLines reads every queue's bind line from httpd's stderr, in
// queue order, and the summary makes a queue that fell back stand out.
func TestBindLines(t *testing.T) {
	log := "percore: native: eth2: 4 rx queues, 4 shards: one queue each\n" +
		"percore: afxdp: eth2 queue 2 bound in zero-copy mode, UMEM in hugepages, busy polling (budget 64)\n" +
		"percore: afxdp: eth2 queue 0 bound in zero-copy mode, UMEM in hugepages, busy polling (budget 64)\n" +
		"percore: afxdp: eth2 queue 3 bound in copy mode (zero-copy unsupported: invalid argument), UMEM in hugepages, busy polling (budget 64)\n" +
		"percore: native: shard 0: queue 0: 16384 connections\n" +
		"percore: afxdp: eth2 queue 1 bound in zero-copy mode, UMEM in hugepages, busy polling (budget 64)\n"
	lines := bindLines(log)
	if len(lines) != 4 || lines[0] != "queue 0 bound in zero-copy mode, UMEM in hugepages, busy polling (budget 64)" || queueOf(lines[3]) != 3 {
		t.Fatalf("bind lines %q", lines)
	}
	want := "queues 0,1,2 bound in zero-copy mode, UMEM in hugepages, busy polling (budget 64); " +
		"queue 3 bound in copy mode (zero-copy unsupported: invalid argument), UMEM in hugepages, busy polling (budget 64)"
	if got := bindSummary(lines); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	if bindLines("no native here\n") != nil || bindSummary(nil) != "" {
		t.Error("a log without bind lines")
	}
}
