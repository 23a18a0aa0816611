package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"percore/shard"
)

// TestNativeBusyPoll serves with preferred busy polling on every queue of
// the lab: veth takes the options (it has no NAPI poll for them to run), no
// queue logs a refusal, fresh, keep-alive and pipelined requests complete,
// and empty polls go through recvfrom.
func TestNativeBusyPoll(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	nt := startNativeTest(t, 2, nil, "", func(o *Options) {
		o.Native.BusyPoll = 64
		o.Native.Logf = func(f string, a ...any) {
			t.Logf(f, a...)
			mu.Lock()
			lines = append(lines, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
	})
	nt.freshConns(50)
	nt.pipelined(20)
	nt.stop()
	mu.Lock()
	log := strings.Join(lines, "\n")
	mu.Unlock()
	if strings.Contains(log, "busy polling off") {
		t.Errorf("a queue refused busy polling: %s", log)
	}
	f := shard.Merge(nt.group.Final())
	if f.Get("http.requests") < 70 || f.Get("xsk.rx_wakeups") == 0 {
		t.Errorf("%d requests, %d recvfrom calls", f.Get("http.requests"), f.Get("xsk.rx_wakeups"))
	}
}
