package shard

import (
	"reflect"
	"strings"
	"testing"
)

type testStats struct {
	RxFrames        uint64    `stat:"count"`
	IPv4BadChecksum uint64    `stat:"drop"`
	ChallengeACKs   uint32    `stat:"count"`
	KickErrors      uint64    `stat:"error"`
	FreeFrames      int       `stat:"gauge"`
	Conns, SynRcvd  int       `stat:"gauge"`
	Hidden          uint64    `stat:"-"`
	Responses       [6]uint64 `stat:"-"`
	Name            string
}

func TestAddFields(t *testing.T) {
	var r Report
	r.AddFields("x.", &testStats{RxFrames: 1, IPv4BadChecksum: 2, ChallengeACKs: 3, KickErrors: 4, FreeFrames: 5, Conns: -1, SynRcvd: 7, Hidden: 8})
	want := []Counter{
		{"x.rx_frames", Count, 1}, {"x.ipv4_bad_checksum", Drop, 2}, {"x.challenge_acks", Count, 3},
		{"x.kick_errors", Error, 4}, {"x.free_frames", Gauge, 5}, {"x.conns", Gauge, 0}, {"x.syn_rcvd", Gauge, 7},
	}
	if !reflect.DeepEqual(r.Counters, want) {
		t.Fatalf("counters\n%v\nwant\n%v", r.Counters, want)
	}
	if r.Sum(Drop) != 2 || r.Sum(Gauge) != 12 {
		t.Fatalf("drops %d gauges %d, want 2 and 12", r.Sum(Drop), r.Sum(Gauge))
	}
	if err := CheckFields(testStats{}); err != nil {
		t.Fatal(err)
	}
}

// The names are the ones the reports have always used: metric names and
// scripts depend on them.
func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"RxFrames":         "rx_frames",
		"RxRingFull":       "rx_ring_full",
		"IPv4BadChecksum":  "ipv4_bad_checksum",
		"IPv4TCP":          "ipv4_tcp",
		"ChallengeACKs":    "challenge_acks",
		"ARPRequestsRx":    "arp_requests_rx",
		"ICMPEchoTooBig":   "icmp_echo_too_big",
		"OOODrop":          "ooo_drop",
		"PAWSDrop":         "paws_drop",
		"RTOTimeouts":      "rto_timeouts",
		"SACKSkipped":      "sack_skipped",
		"OOWAckLimit":      "oow_ack_limit",
		"FinWait2Timeout":  "fin_wait2_timeout",
		"TimeWaitRecycled": "time_wait_recycled",
		"Conns":            "conns",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckFields(t *testing.T) {
	type bad struct {
		Tagged   uint64   `stat:"drop"`
		Untagged uint64   // no kind
		Typo     int      `stat:"dorp"`
		List     []uint32 `stat:"count"`
		Text     string   `stat:"gauge"`
	}
	err := CheckFields(&bad{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"bad.Untagged has no stat tag", `bad.Typo: stat tag "dorp"`, "bad.List: a list", "bad.Text: stat tag on a string"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Tagged:") || strings.Count(err.Error(), "\n") != 3 {
		t.Errorf("error %q: want exactly the four bad fields", err)
	}
	if err := CheckFields(3); err == nil {
		t.Error("CheckFields(3): no error")
	}
}
