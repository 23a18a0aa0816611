package server

import (
	"reflect"
	"testing"

	"percore/afxdp"
	"percore/netstack"
)

// Every integer counter of the structs native.drops sums is sorted into drop
// or not-a-drop, so a counter added later fails here until someone decides.
func TestNativeDropsCoverEveryCounter(t *testing.T) {
	for _, v := range []any{netstack.Stats{}, netstack.TCPStats{}, afxdp.Stats{}} {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if k := f.Type.Kind(); k != reflect.Uint64 && k != reflect.Int {
				continue
			}
			if _, ok := dropCounters[f.Name]; !ok {
				t.Errorf("%s.%s is not in dropCounters: mark it a drop or not", rt.Name(), f.Name)
			}
		}
	}
}

// native.drops sums exactly the marked counters: one of each kind set to a
// distinct power of two shows which were taken.
func TestNativeDropsSum(t *testing.T) {
	st := netstack.Stats{RxFrames: 1, EthTruncated: 2, TxTooBig: 4, ICMPEchoTooBig: 8}
	ts := netstack.TCPStats{InSegs: 16, OOWAckLimit: 32, AfterFinDrop: 64, AppTimeouts: 128, TableFull: 256}
	xs := afxdpStats{afxdp.Stats{RxRingFull: 512, Kicks: 1024}}
	if got, want := nativeDrops(&st, &ts, &xs), uint64(2+4+8+32+64+256+512); got != want {
		t.Fatalf("drops %d, want %d", got, want)
	}
}
