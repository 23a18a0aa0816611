package specweb

import (
	"bytes"
	"strings"
	"testing"
)

// handTables has two ads that can match the user of handUser: ad 5 weighs 3
// (gender only) against a minimum of 4, ad 6 weighs 3+5 = 8 (gender and
// region) against a minimum of 8. No other ad can reach its minimum.
func handTables(min6 int) *Tables {
	t := &Tables{Users: []uint32{handUser}}
	for i := range t.Ads {
		t.Ads[i] = Ad{ID: i, MinMatch: 1, Weights: [5]uint8{1, 1, 1, 1, 1}}
	}
	w := [5]uint8{3, 4, 5, 6, 7}
	t.Ads[5] = Ad{ID: 5, Demo: 0x10000000 | 0x02000000, Weights: w, MinMatch: 4}
	t.Ads[6] = Ad{ID: 6, Demo: 0x10000000 | 0x00100000 | 0x00000800, Weights: w, MinMatch: min6}
	return t
}

// handUser: male, age group 0, region 0, interest bits 10 and 0.
const handUser = 0x10000000 | 0x01000000 | 0x00100000 | 0x00000400 | 0x00000001

func TestSelectHandChecked(t *testing.T) {
	for _, c := range []struct {
		min6, lastAd, ad, weight int
	}{
		{8, 4, 6, 8},   // 5 falls short (3 < 4), 6 reaches 8
		{8, 6, 6, 8},   // the walk wraps all the way round to 6
		{8, 359, 6, 8}, // from the last ad, wrap to 0
		{9, 4, 5, 3},   // none reaches: the ad after last_ad, with its weight
		{9, 359, 0, 0},
	} {
		ad, w := handTables(c.min6).Select(handUser, c.lastAd)
		if ad != c.ad || w != c.weight {
			t.Errorf("min6 %d, last_ad %d: ad %d weight %d, want ad %d weight %d", c.min6, c.lastAd, ad, w, c.ad, c.weight)
		}
	}
	if got := string(AppendFoundCookie(nil, 6, 8, true)); got != "found_cookie=Ad_id=6&Ad_weight=8&Expired=1" {
		t.Errorf("found cookie %q", got)
	}
}

func TestTablesFiles(t *testing.T) {
	a, b := NewTables(7, 50), NewTables(7, 50)
	pa, aa := a.AppendPersonality(nil), a.AppendAds(nil)
	if !bytes.Equal(pa, b.AppendPersonality(nil)) || !bytes.Equal(aa, b.AppendAds(nil)) {
		t.Fatal("the same seed drew different tables")
	}
	if bytes.Equal(aa, NewTables(8, 50).AppendAds(nil)) {
		t.Fatal("two seeds drew the same ads")
	}
	if len(pa) != 50*15 || len(aa) != NumAds*39 {
		t.Fatalf("User.Personality %d bytes, Custom.Ads %d", len(pa), len(aa))
	}
	if !strings.HasPrefix(string(pa), "10000 ") || !strings.HasPrefix(string(aa), "    0 ") {
		t.Fatalf("records start %q and %q", pa[:15], aa[:39])
	}
	got, err := ParseTables(pa, aa)
	if err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(got.Users, a.Users) || got.Ads != a.Ads {
		t.Fatal("ParseTables did not give back the tables")
	}
	for _, bad := range [][2][]byte{
		{nil, aa}, {pa[:14], aa}, {pa, aa[:39*359]},
		{[]byte("10001 00000000\n"), aa}, // first id must be 10000
		{pa, append([]byte("    0 0000000X"), aa[14:]...)},
	} {
		if _, err := ParseTables(bad[0], bad[1]); err == nil {
			t.Errorf("ParseTables accepted %q / %q...", bad[0], bad[1][:39])
		}
	}
	// Most users find an ad that reaches its minimum.
	found := 0
	for _, u := range a.Users {
		ad, w := a.Select(u, 0)
		if w >= a.Ads[ad].MinMatch {
			found++
		}
	}
	if found < len(a.Users)/2 {
		t.Errorf("only %d of %d users matched an ad", found, len(a.Users))
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseCookie(t *testing.T) {
	for _, c := range []struct {
		in           string
		user, lastAd int
	}{
		{"my_cookie=user_id=10003&last_ad=17", 10003, 17},
		{"a=b; my_cookie=user_id=10000&last_ad=0 ", 10000, 0},
		{"my_cookie=user_id=99999&last_ad=359;x=y", 99999, 359},
	} {
		u, l, err := ParseCookie([]byte(c.in))
		if err != nil || u != c.user || l != c.lastAd {
			t.Errorf("ParseCookie(%q) = %d, %d, %v", c.in, u, l, err)
		}
	}
	for _, in := range []string{
		"", "my_cookie=", "other=1", "my_cookie=user_id=&last_ad=1", "my_cookie=user_id=10003",
		"my_cookie=user_id=10003&last_ad=360", "my_cookie=user_id=10003&last_ad=1x",
		"my_cookie=user_id=1234567890&last_ad=1", "my_cookie=last_ad=1&user_id=10003",
		"my_cookie=user_id=-1&last_ad=1", "my_cookie=user_id=10003&&last_ad=1",
	} {
		if _, _, err := ParseCookie([]byte(in)); err != ErrCookie {
			t.Errorf("ParseCookie(%q): err %v, want ErrCookie", in, err)
		}
	}
	v := []byte("a=b; my_cookie=user_id=10003&last_ad=17")
	if n := testing.AllocsPerRun(100, func() { ParseCookie(v) }); n != 0 {
		t.Errorf("ParseCookie allocates %v times", n)
	}
}

func TestRewriteTags(t *testing.T) {
	f := AppendFile(nil, 3, 2, 4)
	tags := findTags(f)
	if len(tags) != 5 {
		t.Fatalf("%d tags, want 5", len(tags))
	}
	for k, p := range tags {
		if got := string(f[p : p+pathLen]); got != AdPath((3+k)%NumAds) {
			t.Errorf("tag %d points at %s, want %s", k, got, AdPath((3+k)%NumAds))
		}
	}
	out := rewrite(f, tags, AdPath(47))
	if len(out) != len(f) || bytes.Count(out, []byte(tagOpen+AdPath(47)+tagClose)) != 5 {
		t.Fatalf("rewrite: %d bytes, %d tags at ad 47", len(out), bytes.Count(out, []byte(AdPath(47))))
	}
	for _, p := range tags {
		copy(f[p:], AdPath(47))
	}
	if !bytes.Equal(out, f) {
		t.Fatal("rewrite changed more than the tags' paths")
	}
	if findTags([]byte(tagOpen+"/file_set/dir00000/class0_0\">")) != nil {
		t.Error("findTags took a tag without its end")
	}
}

func rewrite(f []byte, tags []int, path string) []byte {
	var b bytes.Buffer
	writeRewritten(&b, f, tags, path)
	return b.Bytes()
}
