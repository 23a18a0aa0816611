package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"percore/specweb"
)

// TestMain lets the test binary be the CGI program that serve runs (this
// program's cgi command, as no specweb-cgi lies beside it).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "cgi" {
		os.Exit(run(os.Args[1:], os.Stderr, nil, nil))
	}
	os.Exit(m.Run())
}

// TestEndToEnd generates the file set for 2 connections, serves it on one
// shard and drives every kind of request, good and bad, through HTTP.
func TestEndToEnd(t *testing.T) {
	root := t.TempDir()
	var stderr bytes.Buffer
	if c := run([]string{"gen", "--conns", "2", "--dir", root}, &stderr, nil, nil); c != 0 {
		t.Fatalf("gen: exit %d: %s", c, stderr.String())
	}
	if !strings.Contains(stderr.String(), "100% 26/26 directories") {
		t.Fatalf("gen progress: %s", stderr.String())
	}

	// Commands are taken from 127.0.0.2 only: the plain client (127.0.0.1)
	// is refused, one bound to 127.0.0.2 obeyed.
	sig := make(chan os.Signal, 1)
	addrs := make(chan netip.AddrPort, 1)
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"serve", "--dir", root, "--port", "0", "--address", "127.0.0.1", "--smp", "1",
			"--stats-interval", "0", "--command-from", "127.0.0.2"}, &stderr, sig, func(a netip.AddrPort) { addrs <- a })
	}()
	var addr netip.AddrPort
	select {
	case addr = <-addrs:
	case c := <-code:
		t.Fatalf("serve exited %d: %s", c, stderr.String())
	}
	base := "http://" + addr.String()
	client := &http.Client{}
	admin := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	do := func(c *http.Client, method, path, cookie, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	expect := func(resp *http.Response, body string, code int, what string) {
		t.Helper()
		if resp.StatusCode != code {
			t.Fatalf("%s: %d %q, want %d", what, resp.StatusCode, body, code)
		}
	}

	file := string(specweb.AppendFile(nil, 3, 1, 2))
	resp, body := do(client, "GET", "/file_set/dir00003/class1_2", "", "")
	expect(resp, body, 200, "static GET")
	if body != file {
		t.Fatal("static GET: not the generated file")
	}

	resp, body = do(client, "GET", "/specweb99-fcgi.pl?/file_set/dir00003/class1_2", "", "")
	expect(resp, body, 200, "dynamic GET")
	if !strings.Contains(body, "<pre>\n"+file+"</pre>") || !strings.Contains(body, "QUERY_STRING = /file_set/dir00003/class1_2") {
		t.Fatalf("dynamic GET: the file is not inside the page: %.200q", body)
	}

	// The ad rotation: the server's choice is the one the tables make.
	pers, _ := os.ReadFile(filepath.Join(root, specweb.PersonalityFile))
	ads, _ := os.ReadFile(filepath.Join(root, specweb.AdsFile))
	tables, err := specweb.ParseTables(pers, ads)
	if err != nil {
		t.Fatal(err)
	}
	wantAd, wantW := tables.Select(tables.Users[1], 5)
	resp, body = do(client, "GET", "/specweb99-fcgi.pl?/file_set/dir00003/class1_2", "my_cookie=user_id=10001&last_ad=5", "")
	expect(resp, body, 200, "ad rotation")
	m := regexp.MustCompile(`^found_cookie=Ad_id=(\d+)&Ad_weight=(\d+)&Expired=[01]$`).FindStringSubmatch(resp.Header.Get("Set-Cookie"))
	if m == nil || m[1] != strconv.Itoa(wantAd) || m[2] != strconv.Itoa(wantW) {
		t.Fatalf("Set-Cookie %q, want ad %d weight %d", resp.Header.Get("Set-Cookie"), wantAd, wantW)
	}
	tag := `<!WEB99CAD><IMG SRC="` + specweb.AdPath(wantAd) + `"><!/WEB99CAD>`
	if n := strings.Count(body, tag); n != specweb.Tags(1, 2) || strings.Count(body, "<!WEB99CAD>") != n {
		t.Fatalf("ad rotation: %d tags at ad %d, want all %d", n, wantAd, specweb.Tags(1, 2))
	}

	// CGI: this test binary runs as the program (TestMain), off the shard.
	resp, body = do(client, "GET", "/specweb99-cgi.pl?/file_set/dir00003/class1_2", "", "")
	expect(resp, body, 200, "CGI GET")
	if !strings.Contains(body, "<pre>\n"+file+"</pre>") || !strings.Contains(body, "SCRIPT_NAME = /specweb99-cgi.pl") {
		t.Fatalf("CGI GET: not the page with the file: %.200q", body)
	}

	resp, body = do(client, "POST", "/specweb99-fcgi.pl", "my_cookie=user_id=10001&last_ad=5",
		"urlroot=/file_set/&dir=00003&class=1&num=2&client=7")
	expect(resp, body, 200, "POST")
	if !strings.Contains(body, "POST logged as record 0") {
		t.Fatalf("POST answer %q", body)
	}

	for _, c := range []struct {
		method, path, cookie, body string
		code                       int
	}{
		{"GET", "/specweb99-fcgi.pl?/file_set/dir00003/class1_2", "my_cookie=user_id=10001", "", 400},
		{"GET", "/specweb99-fcgi.pl?/file_set/dir00003/class1_2", "my_cookie=user_id=10002&last_ad=1", "", 400}, // 2 users
		{"GET", "/specweb99-fcgi.pl?/file_set/dir00026/class1_2", "", "", 404},                                  // 26 dirs
		{"GET", "/specweb99-fcgi.pl?/file_set/dir00003/class4_2", "", "", 404},
		{"POST", "/specweb99-fcgi.pl", "my_cookie=user_id=10001&last_ad=5", "dir=00003&class=1&num=2", 400},
		{"POST", "/specweb99-fcgi.pl", "my_cookie=user_id=10001&last_ad=5", "client=1&dir=00003&class=1&num=2&" + strings.Repeat("x", 300), 413},
		{"POST", "/specweb99-fcgi.pl", "", "dir=00003&class=1&num=2&client=7", 400},
		{"POST", "/specweb99-fcgi.pl", "my_cookie=user_id=10001&last_ad=5", "dir=00003&class=1&num=2&client=7&dir=00004", 400},
		{"GET", "/specweb99-fcgi.pl?command/Fetch", "", "", 403},
		{"GET", "/specweb99-fcgi.pl?command/Reset", "", "", 403},
		{"GET", "/specweb99-cgi.pl?/file_set/dir00026/class1_2", "", "", 404},
	} {
		resp, body := do(client, c.method, c.path, c.cookie, c.body)
		expect(resp, body, c.code, fmt.Sprintf("%s %s %q %q", c.method, c.path, c.cookie, c.body))
		if !strings.HasPrefix(body, "specweb: ") {
			t.Errorf("%s %s: answer %q does not say what is wrong", c.method, c.path, body)
		}
	}

	resp, body = do(admin, "GET", "/specweb99-fcgi.pl?command/Fetch", "", "")
	expect(resp, body, 200, "Fetch")
	f := strings.Fields(body)
	if len(body) != specweb.RecordLen || len(f) != 9 || f[0] != "0" || f[3] != "00003" || f[6] != "7" || f[7] != "10001" ||
		f[8] != "/file_set/dir00003/class1_2" {
		t.Fatalf("Fetch: %q", body)
	}
	resp, body = do(admin, "GET", "/specweb99-fcgi.pl?command/Reset&maxload=50", "", "")
	expect(resp, body, 200, "Reset")
	resp, body = do(admin, "GET", "/specweb99-fcgi.pl?command/Fetch", "", "")
	expect(resp, body, 200, "Fetch after Reset")
	if body != "" {
		t.Fatalf("Fetch after Reset: %q", body)
	}
	resp, body = do(client, "GET", "/specweb99-fcgi.pl?/file_set/dir00003/class1_2", "my_cookie=user_id=10049&last_ad=5", "")
	expect(resp, body, 200, "ad rotation for a user Reset added")
	resp, body = do(client, "POST", "/specweb99-fcgi.pl", "my_cookie=user_id=10049&last_ad=5",
		"urlroot=/file_set/&dir=00025&class=3&num=8&client=9")
	expect(resp, body, 200, "POST after Reset")
	resp, body = do(client, "GET", "/.post.log", "", "")
	expect(resp, body, 404, "the post log's copy through the static path")

	sig <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Fatalf("serve: exit %d: %s", c, stderr.String())
	}
	// Stopped: the copy on disk holds the log since the Reset.
	saved, err := os.ReadFile(filepath.Join(root, ".post.log"))
	if f := strings.Fields(string(saved)); err != nil || len(saved) != specweb.RecordLen || f[0] != "0" || f[8] != "/file_set/dir00025/class3_8" {
		t.Fatalf(".post.log after stop: %v %q", err, saved)
	}
}

func TestServeMissingFileSet(t *testing.T) {
	var stderr bytes.Buffer
	dir := t.TempDir()
	if c := run([]string{"serve", "--dir", dir, "--port", "0", "--smp", "1"}, &stderr, nil, nil); c != 2 {
		t.Fatalf("exit %d, want 2", c)
	}
	if want := "specweb serve: no file set in " + dir; !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("stderr %q, want one line starting %q", stderr.String(), want)
	}
	for _, args := range [][]string{{}, {"nope"}, {"gen", "--dir", dir}, {"serve"}, {"serve", "--dir", dir, "--docroot", dir}} {
		stderr.Reset()
		if c := run(args, &stderr, nil, nil); c != 2 {
			t.Errorf("%q: exit %d, want 2", args, c)
		}
	}
}

func TestSplitFlags(t *testing.T) {
	mine, rest := splitFlags([]string{"--dir", "d", "--port", "8", "-seed=3", "--smp", "dir", "--command-from", "::1"}, "dir", "seed", "command-from")
	if fmt.Sprint(mine) != "[--dir d -seed=3 --command-from ::1]" || fmt.Sprint(rest) != "[--port 8 --smp dir]" {
		t.Fatalf("mine %q rest %q", mine, rest)
	}
}

// TestServeSetLargerThanCache serves a file set some two thousand times
// --cache-size: static and dynamic GETs of random files, each checked
// against the generator.
func TestServeSetLargerThanCache(t *testing.T) {
	root := t.TempDir()
	var stderr bytes.Buffer
	if c := run([]string{"gen", "--conns", "2", "--dir", root}, &stderr, nil, nil); c != 0 {
		t.Fatalf("gen: exit %d: %s", c, stderr.String())
	}
	sig := make(chan os.Signal, 1)
	addrs := make(chan netip.AddrPort, 1)
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"serve", "--dir", root, "--port", "0", "--address", "127.0.0.1", "--smp", "2",
			"--stats-interval", "0", "--cache-size", "128K", "--post-log", "-"}, &stderr, sig, func(a netip.AddrPort) { addrs <- a })
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a.String()
	case c := <-code:
		t.Fatalf("serve exited %d: %s", c, stderr.String())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		d, c, y := rng.IntN(26), rng.IntN(specweb.Classes), rng.IntN(specweb.FilesPerDir)
		path := "/" + specweb.FilePath(d, c, y)
		file := string(specweb.AppendFile(nil, d, c, y))
		url, cookie := base+path, ""
		switch i % 3 {
		case 1:
			url = base + specweb.DynamicPath + "?" + path
		case 2:
			url, cookie = base+specweb.DynamicPath+"?"+path, "my_cookie=user_id=10001&last_ad=5"
		}
		req, _ := http.NewRequest("GET", url, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		ok := err == nil && resp.StatusCode == 200
		switch i % 3 {
		case 0:
			ok = ok && body == file
		case 1:
			ok = ok && strings.Contains(body, "<pre>\n"+file+"</pre>")
		case 2: // the file with its tags rewritten: same length, same header line
			ok = ok && strings.Contains(body, "<pre>\n"+file[:strings.IndexByte(file, '\n')+1]) &&
				strings.Count(body, "<!WEB99CAD>") == specweb.Tags(c, y)
		}
		if !ok {
			t.Fatalf("%s (cookie %q): %d, %v, %d bytes: not the generated file", url, cookie, resp.StatusCode, err, len(body))
		}
	}
	sig <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Fatalf("serve: exit %d: %s", c, stderr.String())
	}
}
