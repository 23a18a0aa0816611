package sweep

import (
	"strconv"
	"testing"
)

// ethtoolX is `ethtool -x` of an i40e with 8 queues: a 512-entry table.
var ethtoolX = func() string {
	s := "RX flow hash indirection table for eth2 with 8 RX ring(s):\n"
	for i := 0; i < 512; i += 8 {
		s += "  " + strconv.Itoa(i) + ":      0     1     2     3     4     5     6     7\n"
	}
	return s + "RSS hash key:\n" +
		"6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa:0c:aa:bb:cc:dd:ee:ff:00:11:22:33:44\n" +
		"RSS hash function:\n    toeplitz: on\n    xor: off\n    crc32: off\n"
}()

func TestParseEthtoolX(t *testing.T) {
	key, table, err := ParseEthtoolX(ethtoolX)
	if err != nil || table != 512 || len(key) != 52*3-1 || key[:5] != "6d:5a" {
		t.Fatalf("key %q table %d: %v", key, table, err)
	}
	for _, bad := range []string{
		"Cannot get RX ring count: Operation not supported\n",
		"RX flow hash indirection table for eth2 with 8 RX ring(s):\n    0:      0     1\nRSS hash key:\nOperation not supported\n",
	} {
		if _, _, err := ParseEthtoolX(bad); err == nil {
			t.Errorf("ParseEthtoolX(%q) took it", bad)
		}
	}
}
