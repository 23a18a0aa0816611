package specweb

import (
	"fmt"
	"testing"
)

// FuzzParseCookie: any input is either refused or gives values that print
// back to a cookie parsing to the same values.
func FuzzParseCookie(f *testing.F) {
	for _, s := range []string{"my_cookie=user_id=10003&last_ad=17", "a=b; my_cookie=user_id=1&last_ad=359", "my_cookie=", ";;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, l, err := ParseCookie([]byte(s))
		if err != nil {
			return
		}
		if u < 0 || l < 0 || l >= NumAds {
			t.Fatalf("%q: user %d last_ad %d", s, u, l)
		}
		u2, l2, err := ParseCookie(fmt.Appendf(nil, "my_cookie=user_id=%d&last_ad=%d", u, l))
		if err != nil || u2 != u || l2 != l {
			t.Fatalf("%q: %d %d does not round-trip", s, u, l)
		}
	})
}

// FuzzPostBody: an accepted body has every field in range.
func FuzzPostBody(f *testing.F) {
	for _, s := range []string{"urlroot=/file_set/&dir=00003&class=1&num=2&client=7", "dir=1&class=1", "=&&="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parsePostBody([]byte(s))
		if ok && (p.Dir < 0 || p.Dir > 99999 || p.Class < 0 || p.Class >= Classes || p.Num < 0 || p.Num >= FilesPerDir || p.Client < 0) {
			t.Fatalf("%q accepted as %+v", s, p)
		}
		if ok && len(p.appendRecord(nil, 1)) != RecordLen {
			t.Fatalf("%q: record not %d bytes", s, RecordLen)
		}
	})
}
