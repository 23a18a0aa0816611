package wreck

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"percore"
	"percore/specweb"
	"percore/specweb/cgiprog"
	"percore/specweb/fileset"
)

// TestSpecwebMix draws a seeded sample and checks each mix against its
// target, and that the draws repeat with the seed.
func TestSpecwebMix(t *testing.T) {
	const n = 200_000
	m := newMix(7, 0, fileset.Dirs(20), &kindShare)
	var kinds [numKinds]int
	var classes [fileset.Classes]int
	var files [fileset.FilesPerDir]int
	dirs := make([]int, len(m.dirCDF))
	for range n {
		r := m.draw()
		kinds[r.kind]++
		classes[r.class]++
		files[r.num]++
		dirs[r.dir]++
	}
	for i, c := range kinds {
		if share := float64(c) / n; !inMix(share, kindShare[i], n) {
			t.Errorf("%s: %.4f of the requests, want %.4f", kindNames[i], share, kindShare[i])
		}
	}
	for i, c := range classes {
		if share := float64(c) / n; !inMix(share, classShare[i], n) {
			t.Errorf("class %d: %.4f of the requests, want %.4f", i, share, classShare[i])
		}
	}
	// Zipf: the most popular directory about twice the second, three times the third.
	if r := float64(dirs[0]) / float64(dirs[1]); r < 1.8 || r > 2.2 {
		t.Errorf("dir 0 / dir 1 = %.2f, want about 2", r)
	}
	if r := float64(dirs[0]) / float64(dirs[2]); r < 2.7 || r > 3.3 {
		t.Errorf("dir 0 / dir 2 = %.2f, want about 3", r)
	}
	// Files by falling popularity are 4, 3, 5, 2, 6, 1, 7, 8, 0.
	for k := 1; k < len(fileByRank); k++ {
		if files[fileByRank[k-1]] <= files[fileByRank[k]] {
			t.Errorf("file %d drawn %d times, not more than file %d (%d)", fileByRank[k-1], files[fileByRank[k-1]], fileByRank[k], files[fileByRank[k]])
		}
	}
	a, b := newMix(7, 3, 40, &kindShare), newMix(7, 3, 40, &kindShare)
	for range 1000 {
		if a.draw() != b.draw() {
			t.Fatal("the same seed drew different requests")
		}
	}
}

func TestZipfCDF(t *testing.T) {
	cdf := zipfCDF(make([]float64, 3)) // weights 1, 1/2, 1/3 of 11/6
	want := []float64{6.0 / 11, 9.0 / 11, 1}
	for i := range cdf {
		if d := cdf[i] - want[i]; d > 1e-12 || d < -1e-12 {
			t.Fatalf("zipfCDF(3) = %v, want %v", cdf, want)
		}
	}
}

// TestKeepAliveShare: 70% of requests travel on keep-alive connections.
func TestKeepAliveShare(t *testing.T) {
	m := newMix(1, 0, 25, &kindShare)
	var ka, all int
	for range 100_000 {
		if m.keepAlive() {
			ka += keepAliveRun
			all += keepAliveRun
		} else {
			all++
		}
	}
	if share := float64(ka) / float64(all); share < 0.69 || share > 0.71 {
		t.Fatalf("%.3f of requests on keep-alive connections, want 0.70", share)
	}
}

// TestPacing: at 400,000 bit/s, 50,000 bytes take one second.
func TestPacing(t *testing.T) {
	for _, c := range []struct{ t0, bytes, want int64 }{
		{0, 0, 0},
		{0, 50_000, 1e9},
		{5e9, 14_700, 5e9 + 294e6},
		{0, 1 << 40, (1 << 40) * 20_000},
	} {
		if got := pacedAt(c.t0, c.bytes); got != c.want {
			t.Errorf("pacedAt(%d, %d) = %d, want %d", c.t0, c.bytes, got, c.want)
		}
	}
}

// response frames body as a 200 response (cookie: a Set-Cookie value) and
// runs it through a parser with a check, as the client does.
func checkResponse(t *testing.T, f *swFiles, r swReq, status int, cookie string, body []byte) (bool, int) {
	t.Helper()
	var p parser
	var chk bodyCheck
	p.maxHead, p.check = defaultMaxHead, &chk
	chk.reset()
	head := fmt.Sprintf("HTTP/1.1 %d X\r\nContent-Length: %d\r\n", status, len(body))
	if cookie != "" {
		head += "Set-Cookie: " + cookie + "\r\n"
	}
	msg := append([]byte(head+"\r\n"), body...)
	// Fed in two pieces, as reads would cut it.
	cut := len(msg) / 2
	n, res := p.feed(msg[:cut])
	if res == pMore {
		rest := append(append([]byte(nil), msg[n:cut]...), msg[cut:]...)
		_, res = p.feed(rest)
	}
	if res != pDone {
		t.Fatalf("parser: %v", res)
	}
	return f.check(&r, p.status, &chk)
}

func dynamicPage(file []byte) []byte {
	b := []byte("<html>\n<p>QUERY_STRING = /file_set/dir00001/class1_2" + fileset.PageBodyStart)
	return append(append(b, file...), fileset.PageSuffix...)
}

// TestSpecwebCheck: the checks pass the right answers and catch a wrong
// byte, a wrong length and a malformed cookie.
func TestSpecwebCheck(t *testing.T) {
	f := newSwFiles(30)
	st := swReq{kind: kStatic, dir: 1, class: 1, num: 2}
	file := fileset.AppendFile(nil, 1, 1, 2)
	if ok, _ := checkResponse(t, f, st, 200, "", file); !ok {
		t.Fatal("static: the right file rejected")
	}
	bad := bytes.Clone(file)
	bad[len(bad)/2] ^= 1
	if ok, _ := checkResponse(t, f, st, 200, "", bad); ok {
		t.Fatal("static: a wrong byte passed")
	}
	if ok, _ := checkResponse(t, f, st, 200, "", file[:len(file)-1]); ok {
		t.Fatal("static: a short file passed")
	}
	if ok, _ := checkResponse(t, f, swReq{kind: kStatic, dir: 1, class: 1, num: 3}, 200, "", file); ok {
		t.Fatal("static: another file passed")
	}
	if ok, _ := checkResponse(t, f, st, 404, "", file); ok {
		t.Fatal("static: a 404 passed")
	}

	dy := swReq{kind: kDynamic, dir: 1, class: 1, num: 2}
	if ok, _ := checkResponse(t, f, dy, 200, "", dynamicPage(file)); !ok {
		t.Fatal("dynamic: the right page rejected")
	}
	if ok, _ := checkResponse(t, f, dy, 200, "", dynamicPage(file[:len(file)-2])); ok {
		t.Fatal("dynamic: a short page passed")
	}

	ad := swReq{kind: kAd, dir: 1, class: 1, num: 2}
	good := "found_cookie=Ad_id=47&Ad_weight=12&Expired=0"
	if ok, n := checkResponse(t, f, ad, 200, good, dynamicPage(file)); !ok || n != 47 {
		t.Fatalf("ad: the right answer gave %v, ad %d", ok, n)
	}
	for _, c := range []string{"", "found_cookie=Ad_id=360&Ad_weight=1&Expired=0", "found_cookie=Ad_id=4&Ad_weight=&Expired=0",
		"found_cookie=Ad_id=4&Ad_weight=1&Expired=2", "my_cookie=Ad_id=4&Ad_weight=1&Expired=0", good + "x"} {
		if ok, _ := checkResponse(t, f, ad, 200, c, dynamicPage(file)); ok {
			t.Errorf("ad: cookie %q passed", c)
		}
	}

	post := swReq{kind: kPost, dir: 1, class: 1, num: 2}
	if ok, _ := checkResponse(t, f, post, 200, "", []byte("<html>\n<pre>\n"+fileset.PostAnswer+"12\n</pre>")); !ok {
		t.Fatal("post: the right answer rejected")
	}
	if ok, _ := checkResponse(t, f, post, 200, "", []byte("<html>\nnothing\n")); ok {
		t.Fatal("post: a page without the answer passed")
	}
	cg := swReq{kind: kCGI, dir: 1, class: 1, num: 2}
	if ok, _ := checkResponse(t, f, cg, 200, "", dynamicPage(file)); !ok {
		t.Fatal("cgi: the right page rejected")
	}
	if ok, _ := checkResponse(t, f, cg, 501, "", []byte("not implemented\n")); ok {
		t.Fatal("cgi: a 501 passed")
	}
}

// TestSpecwebRequests: each kind's request is what the server's routes take.
func TestSpecwebRequests(t *testing.T) {
	r := swReq{dir: 12, class: 1, num: 3}
	for k, want := range map[swKind]string{
		kStatic:  "GET /file_set/dir00012/class1_3 HTTP/1.1\r\nHost: h:1\r\n\r\n",
		kDynamic: "GET /specweb99-fcgi.pl?/file_set/dir00012/class1_3 HTTP/1.1\r\nHost: h:1\r\n\r\n",
		kAd:      "GET /specweb99-fcgi.pl?/file_set/dir00012/class1_3 HTTP/1.1\r\nHost: h:1\r\nCookie: my_cookie=user_id=10005&last_ad=7\r\n\r\n",
		kCGI:     "GET /specweb99-cgi.pl?/file_set/dir00012/class1_3 HTTP/1.1\r\nHost: h:1\r\n\r\n",
		kPost: "POST /specweb99-fcgi.pl HTTP/1.1\r\nHost: h:1\r\nCookie: my_cookie=user_id=10005&last_ad=7\r\n" +
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 51\r\n\r\n" +
			"urlroot=/file_set/&dir=00012&class=1&num=3&client=2",
	} {
		r.kind = k
		if got := string(appendSwRequest(nil, &r, "h:1", 10005, 7, 2, false)); got != want {
			t.Errorf("%s:\n got %q\nwant %q", kindNames[k], got, want)
		}
	}
	r.kind = kStatic
	if got := string(appendSwRequest(nil, &r, "h:1", 10005, 7, 2, true)); !strings.Contains(got, "\r\nConnection: close\r\n") {
		t.Errorf("a connection's last request lacks Connection: close: %q", got)
	}
}

func TestSpecwebFlags(t *testing.T) {
	cfg, _, err := ParseFlags([]string{"--server", "127.0.0.1:80", "--workload", "specweb99", "--conn", "10"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Warmup != specwebWarmup || cfg.Duration != specwebDuration || cfg.Seed != 0 {
		t.Errorf("defaults: warmup %v, duration %v, seed %d", cfg.Warmup, cfg.Duration, cfg.Seed)
	}
	if dirs, users := specwebShape(&cfg); dirs != fileset.Dirs(10) || users != 10 {
		t.Errorf("shape: %d dirs, %d users", dirs, users)
	}
	cfg, _, err = ParseFlags([]string{"--server", "127.0.0.1:80", "--workload", "specweb99", "--warmup", "1s", "--duration", "3s", "--file-set", "100"})
	if err != nil || cfg.Warmup != time.Second || cfg.Duration != 3*time.Second {
		t.Errorf("given: warmup %v, duration %v, %v", cfg.Warmup, cfg.Duration, err)
	}
	if dirs, users := specwebShape(&cfg); dirs != fileset.Dirs(100) || users != 100 {
		t.Errorf("--file-set 100: %d dirs, %d users", dirs, users)
	}
	for _, args := range [][]string{
		{"--workload", "specweb"},
		{"--workload", "specweb99", "--pipeline", "2"},
		{"--workload", "specweb99", "--rate", "10"},
		{"--file-set", "100"},
		{"--warmup", "-1s"},
	} {
		if _, _, err := ParseFlags(append([]string{"--server", "127.0.0.1:80"}, args...)); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	if cfg, _, err := ParseFlags([]string{"--server", "127.0.0.1:80"}); err != nil || cfg.Duration != 10*time.Second || cfg.Warmup != 0 {
		t.Errorf("plain run's defaults changed: %v %v %v", cfg.Duration, cfg.Warmup, err)
	}
}

// TestSpecwebAllocs: drawing, building a request, parsing and checking an
// answer of every kind allocate nothing once a file's hash is known.
func TestSpecwebAllocs(t *testing.T) {
	m := newMix(1, 0, 30, &kindShare)
	f := newSwFiles(30)
	buf := make([]byte, 0, 512)
	file := fileset.AppendFile(nil, 1, 1, 2)
	page := dynamicPage(file)
	frame := func(cookie string, body []byte) []byte {
		h := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n", len(body))
		if cookie != "" {
			h += "Set-Cookie: " + cookie + "\r\n"
		}
		return append([]byte(h+"\r\n"), body...)
	}
	cases := []struct {
		r    swReq
		resp []byte
	}{
		{swReq{kind: kStatic, dir: 1, class: 1, num: 2}, frame("", file)},
		{swReq{kind: kDynamic, dir: 1, class: 1, num: 2}, frame("", page)},
		{swReq{kind: kAd, dir: 1, class: 1, num: 2}, frame("found_cookie=Ad_id=47&Ad_weight=12&Expired=0", page)},
		{swReq{kind: kPost, dir: 1, class: 1, num: 2}, frame("", []byte("<pre>\n"+fileset.PostAnswer+"3\n"))},
	}
	f.sum(&cases[0].r)
	var p parser
	var chk bodyCheck
	p.maxHead, p.check = defaultMaxHead, &chk
	allocs := testing.AllocsPerRun(100, func() {
		r := m.draw()
		buf = appendSwRequest(buf[:0], &r, "127.0.0.1:8080", 10001, 5, 0, r.num == 0)
		for i := range cases {
			p.reset()
			chk.reset()
			if _, res := p.feed(cases[i].resp); res != pDone {
				panic("not framed")
			}
			if ok, _ := f.check(&cases[i].r, p.status, &chk); !ok {
				panic("rejected")
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request, want 0", allocs)
	}
}

// TestMain lets the test binary be the SPECweb99 CGI program that the
// server in TestSpecwebEndToEnd runs per CGI-style GET.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "cgi" {
		if err := cgiprog.Serve(os.Getenv, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSpecwebEndToEnd generates the file set for 20 connections, serves it
// on one shard of percore on 127.0.0.1 and runs the workload with 20 users
// for 2 s, in clear and over TLS (SPECweb99_SSL): no errors, every answer
// valid, users conforming.
func TestSpecwebEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generates 190 MB and runs for seconds")
	}
	const conns = 20
	root, app := specwebFiles(t, conns)
	t.Run("http", func(t *testing.T) { specwebRun(t, app, root, conns, nil) })
	// SPECweb99_SSL: the same workload over TLS.
	t.Run("https", func(t *testing.T) {
		cert, key := writeTestCert(t, netip.AddrFrom4([4]byte{127, 0, 0, 1}))
		specwebRun(t, app, root, conns, []string{"--tls-cert", cert, "--tls-key", key}, "--tls", "--tls-ca", cert)
	})
}

// specwebRun serves app's file set (root) on one shard of percore on
// 127.0.0.1 with the extra server flags, and runs the workload with conns
// users for 2 s, with the extra wreck flags: checkSpecweb's checks, and no
// handshake helper left.
func specwebRun(t *testing.T, app *specweb.App, root string, conns int, serverFlags []string, wreckFlags ...string) {
	srv := serveSpecweb(t, app, root, append([]string{"--address", "127.0.0.1", "--port", "0", "--smp", "1"}, serverFlags...)...)
	cfg, _, err := ParseFlags(append([]string{"--server", srv.Addr().String(), "--workload", "specweb99", "--conn", fmt.Sprint(conns),
		"--seed", "3", "--warmup", "500ms", "--duration", "2s"}, wreckFlags...))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if stacks := helpers(); stacks != "" {
		t.Errorf("handshake helpers left after the run:\n%s", stacks)
	}
	if cfg.TLS.Enabled && (res.TLS == nil || res.TLS.Handshakes == 0 || res.TLS.HandshakeErrors != 0) {
		t.Errorf("TLS: %+v, want handshakes and no failures", res.TLS)
	}
	checkSpecweb(t, res, conns)
}

// specwebFiles generates the file set for conns connections and loads the
// application over it (its CGI program: this test binary).
func specwebFiles(t *testing.T, conns int) (string, *specweb.App) {
	t.Helper()
	root := t.TempDir()
	if err := specweb.Generate(root, specweb.Dirs(conns), 1, conns, nil); err != nil {
		t.Fatal(err)
	}
	app, err := specweb.Load(root, specweb.Config{Seed: 1, CGI: []string{os.Args[0], "cgi"}})
	if err != nil {
		t.Fatal(err)
	}
	return root, app
}

// serveSpecweb serves app's file set (root) with percore started with
// flags.
func serveSpecweb(t *testing.T, app *specweb.App, root string, flags ...string) *percore.Server {
	t.Helper()
	o, err := percore.ParseFlags(append(flags, "--stats-interval", "0"))
	if err != nil {
		t.Fatal(err)
	}
	o.Docroot = root
	srv := percore.New()
	app.Register(srv)
	if err := srv.Start(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(); <-srv.Done() })
	return srv
}

// checkSpecweb asserts a short run of conns users: no errors, every answer
// valid, the mix within tolerance, the verdict valid but for conformance,
// some users conforming, all paced.
func checkSpecweb(t *testing.T, res *Result, conns int) {
	t.Helper()
	var out strings.Builder
	res.WriteText(&out)
	t.Log(out.String())
	sw := res.Specweb
	if sw == nil {
		t.Fatal("no SPECweb99 result")
	}
	if res.Errors.Total() != 0 {
		t.Errorf("errors: %+v", res.Errors)
	}
	for _, k := range append(slices.Clip(sw.Kinds), sw.Classes...) {
		if k.Invalid != 0 || k.Errors != 0 {
			t.Errorf("%s: %d invalid answers, %d errors", k.Name, k.Invalid, k.Errors)
		}
		if !k.InMix {
			t.Errorf("%s: %.2f%% of the requests, target %.2f%%", k.Name, 100*k.Share, 100*k.Target)
		}
	}
	// The verdict: valid but for conformance, which is timing (a loaded
	// machine starves the users); answers and the mix are not.
	for _, why := range sw.Invalid {
		if strings.Contains(why, "of connections conform") {
			t.Logf("conformance under load: %s", why)
			continue
		}
		t.Errorf("run invalid: %s", why)
	}
	if sw.Valid != (len(sw.Invalid) == 0) {
		t.Errorf("verdict valid %v with reasons %q", sw.Valid, sw.Invalid)
	}
	if sw.Users != conns || sw.Conforming == 0 || sw.Ops == 0 || sw.MeanResponseMs <= 0 {
		t.Errorf("report: %+v", sw)
	}
	if sw.Kinds[kStatic].Requests == 0 {
		t.Error("no static requests")
	}
	// Users are paced: none reads much faster than its 400 kbit/s line.
	if sw.MeanUserKbps > 2*userRate/1e3 {
		t.Errorf("users read %.0f kbit/s on average: not paced", sw.MeanUserKbps)
	}
}

// TestSpecwebVerdict: the run's validity from hand-set counts.
func TestSpecwebVerdict(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Conns = 2
	mk := func(kinds [numKinds]kindCount, lines [2]int64) *swUsers {
		c := newSwClient(nil, newAcct(0, &cfg, 2, -1), nil, 0, 30, 2, 0)
		c.measureT0, c.stopped = 0, 10e9
		for i := range c.users {
			c.users[i].bytes = lines[i] / 20_000 // pacedAt: 20 µs a byte
		}
		c.kinds = kinds
		c.classes = [4]uint64{3500, 5000, 1400, 100}
		return c.swUsers
	}
	var kinds [numKinds]kindCount
	for i, s := range kindShare {
		kinds[i].Responses = uint64(s * 10000)
	}
	r := specwebResult([]*swUsers{mk(kinds, [2]int64{10e9, 10e9})}, 30, false, 0, 10)
	if !r.Valid || r.Conforming != 2 || r.MinUserKbps != 400 || r.Ops != 10000 {
		t.Fatalf("a clean run: %+v", r)
	}
	// One user served at 300 kbit/s: 50% conform.
	r = specwebResult([]*swUsers{mk(kinds, [2]int64{10e9, 7.5e9})}, 30, false, 0, 10)
	if r.Valid || r.Conforming != 1 || r.MinUserKbps != 300 {
		t.Fatalf("a slow user: %+v", r)
	}
	// 2% of POSTs fail their check, and 2 of 15 CGIs.
	bad := kinds
	bad[kPost].Invalid = 10
	bad[kCGI].Errors = 2
	r = specwebResult([]*swUsers{mk(bad, [2]int64{10e9, 10e9})}, 30, false, 0, 10)
	if r.Valid || len(r.Invalid) != 2 || !strings.Contains(r.Invalid[0], "cgi errors") || !strings.Contains(r.Invalid[1], "post errors") {
		t.Fatalf("invalid POSTs and CGIs: %+v", r.Invalid)
	}
	// The static share 20% off its target.
	skew := kinds
	skew[kStatic].Responses = 5600
	r = specwebResult([]*swUsers{mk(skew, [2]int64{10e9, 10e9})}, 30, false, 0, 10)
	if r.Valid {
		t.Fatalf("a skewed mix: %+v", r)
	}
}

// TestSpecwebStaticOnly: the static-only mix draws the same files as the
// full one, all as static GETs; its verdict judges the static share alone;
// and the flag belongs to the specweb99 workload.
func TestSpecwebStaticOnly(t *testing.T) {
	full, static := newMix(7, 3, 40, &kindShare), newMix(7, 3, 40, kindShares(true))
	for range 10_000 {
		f, s := full.draw(), static.draw()
		if s.kind != kStatic || f.dir != s.dir || f.class != s.class || f.num != s.num {
			t.Fatalf("static-only drew %+v where the full mix drew %+v", s, f)
		}
	}
	cfg := DefaultConfig()
	cfg.Conns = 2
	c := newSwClient(nil, newAcct(0, &cfg, 2, -1), nil, 0, 30, 2, 0)
	c.measureT0, c.stopped = 0, 10e9
	for i := range c.users {
		c.users[i].bytes = 10e9 / 20_000
	}
	c.kinds[kStatic].Responses = 10000
	c.classes = [4]uint64{3500, 5000, 1400, 100}
	if r := specwebResult([]*swUsers{c.swUsers}, 30, true, 0, 10); !r.Valid || !r.StaticOnly {
		t.Fatalf("a clean static-only run: %+v", r)
	}
	if r := specwebResult([]*swUsers{c.swUsers}, 30, false, 0, 10); r.Valid {
		t.Fatal("static GETs alone passed as the full mix")
	}
	var b strings.Builder
	specwebResult([]*swUsers{c.swUsers}, 30, true, 0, 10).writeText(&b)
	if !strings.HasPrefix(b.String(), "SPECweb99 static-only mix: ") {
		t.Errorf("report does not name the mix: %q", b.String())
	}
	if cfg, _, err := ParseFlags([]string{"--server", "127.0.0.1:80", "--workload", "specweb99", "--specweb-static-only"}); err != nil || !cfg.StaticOnly {
		t.Errorf("--specweb-static-only: %v, StaticOnly %v", err, cfg.StaticOnly)
	}
	if _, _, err := ParseFlags([]string{"--server", "127.0.0.1:80", "--specweb-static-only"}); err == nil {
		t.Error("--specweb-static-only accepted without the specweb99 workload")
	}
}
