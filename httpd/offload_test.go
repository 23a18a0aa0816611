package httpd

import (
	"bytes"
	"testing"
)

// upperJob upper-cases its input off the shard.
type upperJob struct{ in, out []byte }

func (j *upperJob) Run() { j.out = bytes.ToUpper(j.in) }

func offloadSetup(s *Site) {
	s.Handle("/upper", func(w *ResponseWriter, r *Request) {
		if j, ok := w.Offloaded().(*upperJob); ok {
			w.Write(j.out)
			return
		}
		w.WriteString("discarded")
		w.Offload(&upperJob{in: bytes.Clone(r.Query)})
	})
}

// TestOffloadWaitsInOrder: a handler's job holds the requests pipelined
// behind it until it is back, and the handler's second call answers.
func TestOffloadWaitsInOrder(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t)}, offloadSetup)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	req := "GET /upper?abc HTTP/1.1\r\nHost: x\r\n\r\nGET /upper?def HTTP/1.1\r\nHost: x\r\n\r\n"
	f.c.Feed([]byte(req), f.now)
	if f.c.Pending() != 0 || len(q.jobs) != 1 || !f.c.Waiting() {
		t.Fatalf("before the job: %d bytes out, %d jobs, waiting %v", f.c.Pending(), len(q.jobs), f.c.Waiting())
	}
	if n := q.run(f.srv, f.now, false); n != 2 {
		t.Fatalf("%d jobs run, want 2 (one per request, in turn)", n)
	}
	rs := readResponses(t, f.drain())
	if len(rs) != 2 || rs[0].body != "ABC" || rs[1].body != "DEF" {
		t.Fatalf("responses %+v", rs)
	}
	if st := f.srv.Stats(); st.Offloads != 2 {
		t.Errorf("Offloads %d, want 2", st.Offloads)
	}
}

// TestOffloadInline: without a FileIO the job runs at once and the handler
// is called again in the same turn.
func TestOffloadInline(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t)}, offloadSetup)
	if r := get(f, "GET", "/upper?xyz"); r.status != 200 || r.body != "XYZ" {
		t.Fatalf("%d %q", r.status, r.body)
	}
}

// TestOffloadStaleDropped: a job whose connection was reset meanwhile is
// dropped when it lands.
func TestOffloadStaleDropped(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t)}, offloadSetup)
	q := &queueIO{}
	f.srv.SetFileIO(q)
	f.c.Feed([]byte("GET /upper?abc HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	f.c.cancelIO()
	q.run(f.srv, f.now, false)
	if f.c.Pending() != 0 || f.c.Waiting() {
		t.Fatalf("a stale job answered: %d bytes out", f.c.Pending())
	}
}

// TestFullFileIOSheds: with the FileIO full, a request that needs a new
// job is answered 503 at once and the connection goes on; one that joins
// a job in flight waits for it.
func TestFullFileIOSheds(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t)}, offloadSetup)
	q := &queueIO{limit: 1}
	f.srv.SetFileIO(q)
	c2 := f.srv.NewConn(testRemote, f.now)
	c3 := f.srv.NewConn(testRemote, f.now)
	f.c.Feed([]byte("GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n"), f.now) // the one job the FileIO takes
	c2.Feed([]byte("GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /upper?abc HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	c3.Feed([]byte("GET /style.css HTTP/1.1\r\nHost: x\r\n\r\n"), f.now) // joins the job
	var out []byte
	for _, s := range c2.Output() {
		out = append(out, s...)
	}
	rs := readResponses(t, string(out))
	if len(rs) != 2 || rs[0].status != 503 || rs[1].status != 503 || rs[0].close || !c2.Waiting() {
		t.Fatalf("shed responses %+v, waiting %v", rs, c2.Waiting())
	}
	if n := q.run(f.srv, f.now, false); n != 1 {
		t.Fatalf("%d jobs run, want 1", n)
	}
	c2.Advance(len(out)) // the 503s, read above
	for i, c := range []*Conn{f.c, c2, c3} {
		var b []byte
		for _, s := range c.Output() {
			b = append(b, s...)
		}
		if rs := readResponses(t, string(b)); len(rs) != 1 || rs[0].status != 200 || rs[0].body != "body{}\n" {
			t.Errorf("conn %d after the job: %+v", i, rs)
		}
	}
	if st := f.srv.Stats(); st.FileShed != 2 || st.Offloads != 0 {
		t.Errorf("FileShed %d (want 2), Offloads %d (want 0)", st.FileShed, st.Offloads)
	}
}
