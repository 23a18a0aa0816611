package netstack

import "time"

// Frame is one packet buffer lent by a Link. Buf is valid until the frame is
// given back (RxDone) or submitted (TxSubmit). ID is the link's own handle for the
// buffer (the UMEM address for AF_XDP); the stack never interprets it.
// Frame stays 32 bytes, the largest struct Go keeps in registers: with a
// field more every copy goes through memory, which the echo benchmark
// shows (so receive times travel beside the frames, in RxBatch's at).
type Frame struct {
	Buf []byte
	ID  uint64
}

// Link is a batched frame device: one NIC queue (afxdp) or an in-memory channel
// (tests). It is set up once per shard; every call moves a batch, so the one
// interface call is amortised over many frames.
type Link interface {
	// RxBatch fills fs with received frames and returns how many. at,
	// when not nil (as long as fs), gets when each frame arrived, if the
	// link knows (AF_XDP: the XDP program's stamp), in nanoseconds since
	// RxClock, and 0 if not: the stack tells by it which transmission an
	// ACK answers, however long after the frame's arrival its Poll reads
	// it. The times are integers so that the stack converts them with
	// one offset a Poll: a time.Time each cost a division a frame.
	RxBatch(fs []Frame, at []int64) int
	// RxClock is the instant RxBatch's times count from, on the clock of
	// the times passed to Poll (AF_XDP: when CLOCK_MONOTONIC read zero).
	// It does not change while the link lives. A link that never reports
	// a time may return the zero Time.
	RxClock() time.Time
	// RxDone gives received frames back to the link.
	RxDone(fs []Frame)
	// TxAlloc fills fs with empty frames of MTU+14 bytes to write into and
	// returns how many it could lend (0 when the tx pool is exhausted).
	TxAlloc(fs []Frame) int
	// TxSubmit queues frames for transmission; each Buf is resliced to the
	// frame's length. Frames not submitted go back with TxFree.
	TxSubmit(fs []Frame)
	// TxFree returns allocated frames that will not be sent.
	TxFree(fs []Frame)
	// Flush makes submitted frames go out (the AF_XDP kick) and recycles
	// completed tx frames.
	Flush()
	// MTU is the largest IP packet the link carries.
	MTU() int
}
