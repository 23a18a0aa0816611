package netstack

import "testing"

// TestUpdateSackedFullScoreboard feeds more disjoint SACK blocks, each above
// the last, than the scoreboard holds: the count must stay within it (it once
// wrapped to 25x and the next ACK indexed out of range).
func TestUpdateSackedFullScoreboard(t *testing.T) {
	var l tcpLayer
	c := &tcpConn{sndUna: 1000, sndMax: 100000, sackOK: true}
	for i := 0; i < 3*tcpMaxSacked; i++ {
		f := TCPFields{NSACK: 1}
		f.SACK[0] = TCPSACKBlock{Left: uint32(2000 + i*1000), Right: uint32(2500 + i*1000)}
		l.updateSacked(c, &f)
		if int(c.nsacked) > tcpMaxSacked {
			t.Fatalf("after block %d: %d ranges in a scoreboard of %d", i, c.nsacked, tcpMaxSacked)
		}
	}
	if c.nsacked != tcpMaxSacked || c.sackedRanges()[0].l != 2000 {
		t.Fatalf("scoreboard %v (%d), want the %d lowest ranges", c.sackedRanges(), c.nsacked, tcpMaxSacked)
	}
}
