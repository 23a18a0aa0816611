package netstack

import (
	"testing"

	"percore/shard"
)

// Every counter declares its kind where it is defined, so a report can sum
// the drops: a counter added without a stat tag fails here.
func TestStatsDeclareKinds(t *testing.T) {
	for _, v := range []any{Stats{}, TCPStats{}, MemStats{}} {
		if err := shard.CheckFields(v); err != nil {
			t.Error(err)
		}
	}
}
