package httpd

import (
	"testing"

	"percore/shard"
)

// Every counter declares its kind where it is defined: a counter added
// without a stat tag fails here.
func TestStatsDeclareKinds(t *testing.T) {
	if err := shard.CheckFields(Stats{}); err != nil {
		t.Error(err)
	}
}
