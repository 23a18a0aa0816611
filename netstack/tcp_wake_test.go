package netstack

import (
	"strings"
	"testing"
)

// An app that pushed back on input (a pipelined request behind one that
// waits for a file read) and is woken once it can go on takes the held
// input at that wake-up, not at the peer's next ACK, which may never come
// before the app answers: the peer sent all it had.
func TestTCPWakeFeedsHeldInput(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	c, app := x.establish()
	app.room = 10 // the first request; the second is held
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: strings.Repeat("r", 2000)})
	x.recv()
	if len(app.in) != 10 || c.appSeq != 5011 {
		t.Fatalf("before the wake-up: in %d, appSeq %d", len(app.in), c.appSeq)
	}
	app.room = -1 // the file read landed: the app answers and takes more
	app.write("resp")
	x.l.wake(TCPHandle{id: c.id, gen: c.gen})
	x.l.poll(x.now)
	if len(app.in) != 2000 || c.rb != nil {
		t.Fatalf("after the wake-up: the app has %d of 2000 bytes", len(app.in))
	}
	x.expect(seg{TCPFields: fl(PA, 1001, 7001, 32768), data: "resp"}) // the window reopened with it
}
