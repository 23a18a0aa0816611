package netstack

import "testing"

func TestSeqnumWrap(t *testing.T) {
	near := seqnum(0xFFFFFFF0)
	past := near.add(0x20) // wrapped to 0x10
	if past != 0x10 {
		t.Fatalf("add wrapped to %#x, want 0x10", uint32(past))
	}
	cases := []struct {
		a, b             seqnum
		lt, leq, gt, geq bool
	}{
		{near, past, true, true, false, false},
		{past, near, false, false, true, true},
		{past, past, false, true, false, true},
		{0, 0x7FFFFFFF, true, true, false, false},
		{0xFFFFFFFF, 0, true, true, false, false},
	}
	for _, c := range cases {
		if c.a.lt(c.b) != c.lt || c.a.leq(c.b) != c.leq || c.a.gt(c.b) != c.gt || c.a.geq(c.b) != c.geq {
			t.Errorf("%#x vs %#x: lt=%v leq=%v gt=%v geq=%v", uint32(c.a), uint32(c.b),
				c.a.lt(c.b), c.a.leq(c.b), c.a.gt(c.b), c.a.geq(c.b))
		}
	}
	if d := past.diff(near); d != 0x20 {
		t.Errorf("diff across wrap = %#x, want 0x20", d)
	}
	if !seqnum(2).inWindow(near, 0x20) || seqnum(0x10).inWindow(near, 0x20) || near.add(^uint32(0)).inWindow(near, 0x20) {
		t.Error("inWindow across wrap")
	}
	if seqMax(near, past) != past || seqMin(near, past) != near {
		t.Error("seqMax/seqMin across wrap")
	}
}
