package httpd

import (
	"errors"
	"strings"
	"testing"
)

type failWriter struct{ calls int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.calls++
	return 0, errors.New("disk full")
}

// TestAccessLogLimits: a full buffer drops lines and a failing writer loses a
// batch; both are counted, neither blocks or breaks serving.
func TestAccessLogLimits(t *testing.T) {
	site, err := NewSite(Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := &failWriter{}
	srv := NewServer(site, w)
	srv.Tick(t0)
	c := srv.NewConn(testRemote, t0)
	req := []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 100))
	lines := 0
	for srv.Stats().LogDropped == 0 {
		c.Feed(req, t0)
		c.Advance(c.Pending())
		if lines += 100; lines > 1e6 {
			t.Fatal("log buffer never filled")
		}
	}
	if len(srv.logBuf) < maxLogBuf || len(srv.logBuf) > maxLogBuf+200 {
		t.Errorf("buffer %d bytes, limit %d", len(srv.logBuf), maxLogBuf)
	}
	dropped := srv.Stats().LogDropped
	srv.Tick(t0)
	if w.calls != 1 || srv.Stats().LogDropped != dropped+1 || len(srv.logBuf) != 0 {
		t.Errorf("after failed flush: calls %d dropped %d buffer %d", w.calls, srv.Stats().LogDropped, len(srv.logBuf))
	}
	if st := srv.Stats(); st.Requests != uint64(lines) || st.Responses[2] != uint64(lines) {
		t.Errorf("serving affected by the log: %+v", st)
	}
}

func TestStatsAdd(t *testing.T) {
	a := Stats{Requests: 1, Responses: [6]uint64{0, 0, 1}, BadInput: 2, Timeouts: 3, Panics: 4, LogDropped: 5}
	var sum Stats
	sum.Add(a)
	sum.Add(a)
	if sum != (Stats{Requests: 2, Responses: [6]uint64{0, 0, 2}, BadInput: 4, Timeouts: 6, Panics: 8, LogDropped: 10}) {
		t.Errorf("sum %+v", sum)
	}
}
