package sweep

import (
	"fmt"
	"regexp"
	"strings"
)

// A NIC hashes each received flow with its Toeplitz key and indexes its
// indirection table with the hash's low bits. wreck-native keeps each of its
// shards to the source ports whose replies hash to that shard's queue, so it
// must be given the client NIC's own key and table size (`ethtool -x` on the
// client machine), not a default: a wrong one sends replies to queues the
// shards do not expect.

var (
	indirRow = regexp.MustCompile(`^\s*\d+:((?:\s+\d+)+)\s*$`)
	hexKey   = regexp.MustCompile(`^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})+$`)
)

// ParseEthtoolX reads the RSS key (as ethtool prints it, aa:bb:...) and
// the indirection table's size from the output of `ethtool -x IFACE`.
func ParseEthtoolX(out string) (key string, table int, err error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if m := indirRow.FindStringSubmatch(l); m != nil {
			table += len(strings.Fields(m[1]))
		}
		if strings.TrimSpace(l) == "RSS hash key:" && i+1 < len(lines) {
			key = strings.TrimSpace(lines[i+1])
		}
	}
	switch {
	case table == 0:
		return "", 0, fmt.Errorf("no RSS indirection table in ethtool -x's output: %q", firstLine(strings.TrimSpace(out)))
	case !hexKey.MatchString(key):
		return "", 0, fmt.Errorf("no RSS hash key in ethtool -x's output (got %q)", key)
	}
	return key, table, nil
}
