package sweep

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// physicalFirst orders cpus so that one thread of every physical core comes
// before any core's second thread, each group in the given order: k shards
// on the first k then share no core while the set has cores to spare, as
// Seastar's one shard per core. core names the physical core of a CPU.
func physicalFirst(cpus []int, core func(cpu int) string) []int {
	seen := map[string]bool{}
	var first, rest []int
	for _, c := range cpus {
		k := core(c)
		if seen[k] {
			rest = append(rest, c)
			continue
		}
		seen[k] = true
		first = append(first, c)
	}
	return append(first, rest...)
}

// sysCore names a CPU's physical core by its thread siblings in sysfs
// ("2,30"); a CPU sysfs says nothing of is a core of its own.
func sysCore(cpu int) string {
	b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu))
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "cpu" + strconv.Itoa(cpu)
}
