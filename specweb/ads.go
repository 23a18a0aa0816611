package specweb

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"percore/specweb/fileset"
)

// The demographic fields of a 32-bit mask, each weighed on its own.
var fieldMasks = [5]uint32{
	0x30000000, // gender
	0x0f000000, // age group
	0x00f00000, // region
	0x000ffc00, // interests 1
	0x000003ff, // interests 2
}

// FirstUser is the id of user 0; a user's id is FirstUser + its index.
const FirstUser = fileset.FirstUser

// MaxUsers keeps user ids to the 5 digits of a User.Personality record.
const MaxUsers = fileset.MaxUsers

// Ad is one Custom.Ads record.
type Ad struct {
	ID       int
	Demo     uint32   // demographics mask
	Weights  [5]uint8 // per field of fieldMasks, 0..15
	MinMatch int      // the weight the user must reach
	Expiry   int64    // seconds after the tables were loaded
}

// Tables are User.Personality (a demographics mask per user) and Custom.Ads.
// They are immutable once built; Reset publishes new ones.
type Tables struct {
	Users []uint32 // user FirstUser+i has mask Users[i]
	Ads   [NumAds]Ad
}

// demographics draws a mask: one gender, one age group, one region, and any
// subset of each interest field.
func demographics(r *rand.Rand) uint32 {
	return 1<<(28+r.IntN(2)) | 1<<(24+r.IntN(4)) | 1<<(20+r.IntN(4)) | r.Uint32()&(fieldMasks[3]|fieldMasks[4])
}

// NewTables draws the tables for users users (1..MaxUsers) from seed.
func NewTables(seed uint64, users int) *Tables {
	r := rand.New(rand.NewPCG(seed, 0x5eb99))
	t := &Tables{Users: make([]uint32, users)}
	for i := range t.Users {
		t.Users[i] = demographics(r)
	}
	for i := range t.Ads {
		a := Ad{ID: i, Demo: demographics(r), Expiry: int64(r.IntN(7200))}
		sum := 0
		for f := range a.Weights {
			a.Weights[f] = uint8(1 + r.IntN(15))
			sum += int(a.Weights[f])
		}
		a.MinMatch = 1 + r.IntN(sum)
		t.Ads[i] = a
	}
	return t
}

// Weigh is the weight of ad a for a user with mask user: the sum of the
// ad's weights over the fields where the two masks share a bit.
func Weigh(user uint32, a *Ad) int {
	w := 0
	for f, m := range fieldMasks {
		if user&a.Demo&m != 0 {
			w += int(a.Weights[f])
		}
	}
	return w
}

// Select walks the ads from the one after lastAd and returns the first whose
// weight for user reaches its minimum match. When none does, it returns the
// ad after lastAd with its weight.
func (t *Tables) Select(user uint32, lastAd int) (ad, weight int) {
	for i := 1; i <= NumAds; i++ {
		a := &t.Ads[(lastAd+i)%NumAds]
		if w := Weigh(user, a); w >= a.MinMatch {
			return a.ID, w
		}
	}
	next := (lastAd + 1) % NumAds
	return next, Weigh(user, &t.Ads[next])
}

// Record sizes of the two files.
const (
	personalityLen = 15 // "10000 3A812C05\n"
	adLen          = 39 // "  123 3A812C05 000ABCDE  17       3600\n"
)

// AppendPersonality appends User.Personality: per user "%5d %08X\n".
func (t *Tables) AppendPersonality(b []byte) []byte {
	for i, m := range t.Users {
		b = fmt.Appendf(b, "%5d %08X\n", FirstUser+i, m)
	}
	return b
}

// AppendAds appends Custom.Ads: per ad "%5d %08X %08X %3d %10d\n", the id,
// the demographics, the five weights as hex digits, the minimum match and
// the expiry.
func (t *Tables) AppendAds(b []byte) []byte {
	for _, a := range t.Ads {
		var w uint32
		for _, x := range a.Weights {
			w = w<<4 | uint32(x)
		}
		b = fmt.Appendf(b, "%5d %08X %08X %3d %10d\n", a.ID, a.Demo, w, a.MinMatch, a.Expiry)
	}
	return b
}

// ParseTables reads the two files back.
func ParseTables(personality, ads []byte) (*Tables, error) {
	if len(personality)%personalityLen != 0 || len(personality) == 0 || len(personality)/personalityLen > MaxUsers {
		return nil, fmt.Errorf("User.Personality: %d bytes, want 1 to %d records of %d", len(personality), MaxUsers, personalityLen)
	}
	if len(ads) != NumAds*adLen {
		return nil, fmt.Errorf("Custom.Ads: %d bytes, want %d records of %d", len(ads), NumAds, adLen)
	}
	t := &Tables{Users: make([]uint32, len(personality)/personalityLen)}
	for i := range t.Users {
		rec := personality[i*personalityLen : (i+1)*personalityLen]
		f := bytes.Fields(rec)
		if len(f) != 2 || rec[personalityLen-1] != '\n' {
			return nil, fmt.Errorf("User.Personality record %d: %q", i, rec)
		}
		id, err1 := strconv.Atoi(string(f[0]))
		m, err2 := strconv.ParseUint(string(f[1]), 16, 32)
		if err1 != nil || err2 != nil || id != FirstUser+i {
			return nil, fmt.Errorf("User.Personality record %d: %q", i, rec)
		}
		t.Users[i] = uint32(m)
	}
	for i := range t.Ads {
		rec := ads[i*adLen : (i+1)*adLen]
		f := bytes.Fields(rec)
		bad := fmt.Errorf("Custom.Ads record %d: %q", i, rec)
		if len(f) != 5 || rec[adLen-1] != '\n' {
			return nil, bad
		}
		id, err1 := strconv.Atoi(string(f[0]))
		demo, err2 := strconv.ParseUint(string(f[1]), 16, 32)
		w, err3 := strconv.ParseUint(string(f[2]), 16, 20)
		minMatch, err4 := strconv.Atoi(string(f[3]))
		exp, err5 := strconv.ParseInt(string(f[4]), 10, 64)
		if errors.Join(err1, err2, err3, err4, err5) != nil || id != i {
			return nil, bad
		}
		a := Ad{ID: id, Demo: uint32(demo), MinMatch: minMatch, Expiry: exp}
		for k := range a.Weights {
			a.Weights[k] = uint8(w >> (4 * (4 - k)) & 15)
		}
		t.Ads[i] = a
	}
	return t, nil
}

// ErrCookie is a Cookie field without a well-formed my_cookie.
var ErrCookie = errors.New("want Cookie: my_cookie=user_id=<id>&last_ad=<0..359>")

// ParseCookie reads "my_cookie=user_id=<id>&last_ad=<n>" from a Cookie
// field value, among other cookies separated by ';'. It allocates nothing.
func ParseCookie(v []byte) (user, lastAd int, err error) {
	for len(v) > 0 {
		c := v
		if i := bytes.IndexByte(v, ';'); i >= 0 {
			c, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		c = bytes.TrimLeft(c, " \t")
		rest, ok := bytes.CutPrefix(c, []byte("my_cookie="))
		if !ok {
			continue
		}
		u, rest, ok1 := field(rest, "user_id=", '&')
		l, rest, ok2 := field(rest, "last_ad=", 0)
		c = bytes.TrimRight(rest, " \t")
		if !ok1 || !ok2 || len(c) != 0 || l >= NumAds {
			return 0, 0, ErrCookie
		}
		return u, l, nil
	}
	return 0, 0, ErrCookie
}

// field reads name, a decimal number of at most 9 digits and then the
// terminator (0: none), returning the number and what follows.
func field(b []byte, name string, term byte) (int, []byte, bool) {
	b, ok := bytes.CutPrefix(b, []byte(name))
	if !ok {
		return 0, nil, false
	}
	n, i := 0, 0
	for ; i < len(b) && i < 10 && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int(b[i]-'0')
	}
	if i == 0 || i > 9 {
		return 0, nil, false
	}
	b = b[i:]
	if term != 0 {
		if len(b) == 0 || b[0] != term {
			return 0, nil, false
		}
		b = b[1:]
	}
	return n, b, true
}

// AppendFoundCookie appends the Set-Cookie value for the chosen ad.
func AppendFoundCookie(b []byte, ad, weight int, expired bool) []byte {
	b = append(b, "found_cookie=Ad_id="...)
	b = strconv.AppendInt(b, int64(ad), 10)
	b = append(b, "&Ad_weight="...)
	b = strconv.AppendInt(b, int64(weight), 10)
	if expired {
		return append(b, "&Expired=1"...)
	}
	return append(b, "&Expired=0"...)
}
