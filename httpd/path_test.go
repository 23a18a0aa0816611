package httpd

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{"/", "/", true},
		{"/a/b", "/a/b", true},
		{"/a/b/", "/a/b/", true},
		{"//a///b", "/a/b", true},
		{"/./a/./b/.", "/a/b/", true},
		{"/a%20b", "/a b", true},
		{"/%C3%A9", "/\xc3\xa9", true},
		{"/%2e", "/", true},
		{"/..", "", false},
		{"/a/..", "", false},
		{"/a/../b", "", false},
		{"/%2E%2e/x", "", false},
		{"/.%2e", "", false},
		{"/a%2Fb", "", false},
		{"/a%5Cb", "", false},
		{"/a\\b", "", false},
		{"/a%00", "", false},
		{"/a%0", "", false},
		{"/a%g0", "", false},
		{"a", "", false},
		{"", "", false},
	} {
		got, ok := cleanPath(nil, []byte(tc.raw))
		if ok != tc.ok || (ok && string(got) != tc.want) {
			t.Errorf("cleanPath(%q) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
		// The fast path may skip cleanPath only where it changes nothing.
		if !needsClean([]byte(tc.raw)) && (!ok || string(got) != tc.raw) {
			t.Errorf("needsClean(%q) = false, but cleanPath gives %q, %v", tc.raw, got, ok)
		}
	}
}

func TestParseHTTPDate(t *testing.T) {
	for _, s := range []string{
		"Sun, 06 Nov 1994 08:49:37 GMT",
		"Mon, 30 Nov 2026 22:07:07 GMT",
		"Thu, 29 Feb 2024 23:59:59 GMT",
		"Thu, 01 Jan 1970 00:00:00 GMT",
	} {
		want, err := time.Parse(httpTimeFormat, s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := parseHTTPDate([]byte(s))
		if !ok || got != want.Unix() {
			t.Errorf("%q: %d %v, want %d", s, got, ok, want.Unix())
		}
	}
	for _, s := range []string{
		"Sunday, 06-Nov-94 08:49:37 GMT", // RFC 850: obsolete, not accepted
		"Sun Nov  6 08:49:37 1994",       // asctime
		"Sun, 06 Nov 1994 08:49:37 UTC",
		"Sun, 06 Foo 1994 08:49:37 GMT",
		"Sun, 32 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 24:49:37 GMT",
		"Sun, 0x Nov 1994 08:49:37 GMT",
		"",
	} {
		if _, ok := parseHTTPDate([]byte(s)); ok {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestSplitTarget(t *testing.T) {
	for _, tc := range []struct {
		t, path, query string
		ok             bool
	}{
		{"/a?b=c", "/a", "b=c", true},
		{"/a?", "/a", "", true},
		{"/a", "/a", "", true},
		{"http://h/a?q", "/a", "q", true},
		{"HTTPS://h:443", "/", "", true},
		{"http://h?q", "/", "q", true},
		{"/a#f", "", "", false},
		{"*", "", "", false},
		{"h:80", "", "", false},
		{"ftp://h/a", "", "", false},
	} {
		p, q, ok := splitTarget([]byte(tc.t))
		if ok != tc.ok || (ok && (string(p) != tc.path || string(q) != tc.query)) {
			t.Errorf("splitTarget(%q) = %q %q %v", tc.t, p, q, ok)
		}
	}
}

// TestNeedsCleanProperty: over random paths from a small alphabet, skipping
// cleanPath is only ever done where it would return the path unchanged.
func TestNeedsCleanProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "/./%2e5cF0a\\"
	buf := make([]byte, 0, 16)
	for range 100000 {
		buf = append(buf[:0], '/')
		for range rng.IntN(12) {
			buf = append(buf, alphabet[rng.IntN(len(alphabet))])
		}
		if needsClean(buf) {
			continue
		}
		got, ok := cleanPath(nil, buf)
		if !ok || string(got) != string(buf) {
			t.Fatalf("needsClean(%q) = false, cleanPath gives %q, %v", buf, got, ok)
		}
	}
}
