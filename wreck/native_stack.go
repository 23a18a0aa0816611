package wreck

import (
	"time"

	"percore/netstack"
)

// stackSide is what a native client (the plain one, nclient, and the
// SPECweb99 users', nswclient) keeps of the stack its connections are on:
// the stack and its link, and what the connections need of it from outside
// the stack's Poll. Inside the Poll, TCP sends what the apps queued by
// itself and a connection must not be reset under it; outside, a
// connection with output is woken (wake), and a failed one is reset
// (runAborts, at the latest at the next step). Owned by the shard.
type stackSide struct {
	stack   *netstack.Stack
	link    netstack.Link
	nowT    time.Time // the stack's time of this step
	aborts  []int32   // connections to reset at the next step, outside the TCP layer (a failure found inside Feed)
	inStack bool      // inside Stack.Poll: TCP sends what the apps queue, no wake needed
	woke    bool      // a connection was woken outside Stack.Poll: poll again before sleeping
	down    bool      // the run is over and every connection reset (resetAll)
}

// wake makes the next Poll send h's output (or its FIN); inside the Poll
// TCP looks by itself.
func (s *stackSide) wake(h netstack.TCPHandle) {
	if !s.inStack {
		s.stack.WakeTCP(h)
		s.woke = true
	}
}

// resetAll ends the run, once: every slot is marked failed (fail, which
// returns the slot's TCB and whether it holds one), every connection a TCB
// still holds is reset, and the resets are flushed.
func resetAll[C any](s *stackSide, now time.Time, conns []C, fail func(*C) (netstack.TCPHandle, bool)) {
	if s.down {
		return
	}
	s.down, s.nowT = true, now
	for i := range conns {
		if h, live := fail(&conns[i]); live {
			s.stack.AbortTCP(now, s.link, h)
		}
	}
	s.stack.Poll(now, s.link)
}

// runAborts resets the connections in s.aborts (indices into conns) that a
// TCB still holds (tcb: the connection's handle, and whether it is live),
// outside the TCP layer: Release runs inside AbortTCP.
func runAborts[C any](s *stackSide, conns []C, tcb func(*C) (netstack.TCPHandle, bool)) {
	for len(s.aborts) > 0 {
		c := &conns[s.aborts[len(s.aborts)-1]]
		s.aborts = s.aborts[:len(s.aborts)-1]
		if h, live := tcb(c); live {
			s.stack.AbortTCP(s.nowT, s.link, h)
		}
	}
}
