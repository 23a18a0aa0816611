package wreck

// The SPECweb99 workload's requests and the checks on their responses.

import (
	"bytes"
	"hash/crc32"
	"strconv"

	"percore/specweb/fileset"
)

// bodyCheck is what the parser shows the SPECweb99 client of one response:
// the Set-Cookie value, the body's length, its CRC-32C and its first
// bytes. Owned by one connection; reset before each request.
type bodyCheck struct {
	n      int64  // body bytes
	sum    uint32 // CRC-32C (Castagnoli) of the body: the CPU computes it at many bytes a cycle
	headN  int
	head   [512]byte // the body's first bytes: a dynamic page's prefix and the file's header line
	cookN  int       // -1: no Set-Cookie
	cookie [96]byte
}

// castagnoli is CRC-32C's table; crc32 uses the SSE 4.2 or ARMv8
// instruction where there is one. A client that checks every byte of
// hundreds of MB/s cannot afford a hash of a byte at a time.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (b *bodyCheck) reset() { b.n, b.sum, b.headN, b.cookN = 0, 0, 0, -1 }

func (b *bodyCheck) write(p []byte) {
	if b.headN < len(b.head) {
		b.headN += copy(b.head[b.headN:], p)
	}
	b.n += int64(len(p))
	b.sum = crc32.Update(b.sum, castagnoli, p)
}

func (b *bodyCheck) setCookie(v []byte) {
	b.cookN = copy(b.cookie[:], v)
	if len(v) > len(b.cookie) {
		b.cookN = len(b.cookie) + 1 // too long: never well-formed
	}
}

// swFiles is a shard's expected file hashes, computed on first use.
type swFiles struct {
	dirs    int
	sums    []uint32
	known   []bool
	scratch []byte // one file's expected bytes, reused
}

func newSwFiles(dirs int) *swFiles {
	n := dirs * fileset.FilesPerDirAll
	return &swFiles{dirs: dirs, sums: make([]uint32, n), known: make([]bool, n),
		scratch: make([]byte, 0, fileset.FileSize(fileset.Classes-1, fileset.FilesPerDir-1))}
}

func (f *swFiles) sum(r *swReq) uint32 {
	i := r.dir*fileset.FilesPerDirAll + r.class*fileset.FilesPerDir + r.num
	if !f.known[i] {
		f.scratch = fileset.AppendFile(f.scratch[:0], r.dir, r.class, r.num)
		f.sums[i], f.known[i] = crc32.Checksum(f.scratch, castagnoli), true
	}
	return f.sums[i]
}

// check reports whether a response with status and body b answers r. An ad
// rotation's chosen ad is returned (else -1).
func (f *swFiles) check(r *swReq, status int, b *bodyCheck) (ok bool, ad int) {
	if status != 200 {
		return false, -1
	}
	var hb [64]byte
	hdr := fileset.Header(hb[:0], r.dir, r.class, r.num)
	size := int64(fileset.FileSize(r.class, r.num))
	head := b.head[:b.headN]
	switch r.kind {
	case kStatic:
		return b.n == size && bytes.HasPrefix(head, hdr) && b.sum == f.sum(r), -1
	case kPost:
		return bytes.Contains(head, []byte(fileset.PostAnswer)), -1
	}
	i := bytes.Index(head, []byte(fileset.PageBodyStart))
	if i < 0 {
		return false, -1
	}
	off := i + len(fileset.PageBodyStart)
	if !bytes.HasPrefix(head[off:], hdr) || b.n != int64(off)+size+int64(len(fileset.PageSuffix)) {
		return false, -1
	}
	if r.kind == kDynamic || r.kind == kCGI { // the same page, CGI's from a separate process
		return b.cookN < 0, -1
	}
	if b.cookN < 0 || b.cookN > len(b.cookie) {
		return false, -1
	}
	ad, ok = parseFoundCookie(b.cookie[:b.cookN])
	return ok, ad
}

// parseFoundCookie reads "found_cookie=Ad_id=<0..359>&Ad_weight=<n>&Expired=<0|1>".
func parseFoundCookie(v []byte) (ad int, ok bool) {
	v, ok1 := bytes.CutPrefix(v, []byte("found_cookie=Ad_id="))
	ad, v, ok2 := decimalThen(v, '&')
	v, ok3 := bytes.CutPrefix(v, []byte("Ad_weight="))
	_, v, ok4 := decimalThen(v, '&')
	ok5 := string(v) == "Expired=0" || string(v) == "Expired=1"
	return ad, ok1 && ok2 && ok3 && ok4 && ok5 && ad < fileset.NumAds
}

// decimalThen reads 1 to 9 digits and the byte term after them.
func decimalThen(b []byte, term byte) (int, []byte, bool) {
	n, i := 0, 0
	for ; i < len(b) && i < 10 && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int(b[i]-'0')
	}
	if i == 0 || i > 9 || i >= len(b) || b[i] != term {
		return 0, nil, false
	}
	return n, b[i+1:], true
}

// appendSwRequest appends r's request bytes for user (an id) whose last ad
// is lastAd, from client shard id; closing asks the server to close after
// answering. It allocates nothing when b has room (a request is under 512
// bytes).
func appendSwRequest(b []byte, r *swReq, host string, user, lastAd, client int, closing bool) []byte {
	var path [32]byte
	p := fileset.AppendPath(append(path[:0], '/'), r.dir, r.class, r.num)
	switch r.kind {
	case kStatic:
		b = append(append(append(b, "GET "...), p...), " HTTP/1.1\r\n"...)
	case kDynamic, kAd:
		b = append(append(append(b, "GET "+fileset.DynamicPath+"?"...), p...), " HTTP/1.1\r\n"...)
	case kCGI:
		b = append(append(append(b, "GET "+fileset.CGIPath+"?"...), p...), " HTTP/1.1\r\n"...)
	case kPost:
		b = append(b, "POST "+fileset.DynamicPath+" HTTP/1.1\r\n"...)
	}
	b = append(append(append(b, "Host: "...), host...), "\r\n"...)
	if closing {
		b = append(b, "Connection: close\r\n"...)
	}
	if r.kind == kAd || r.kind == kPost {
		b = append(b, "Cookie: my_cookie=user_id="...)
		b = strconv.AppendInt(b, int64(user), 10)
		b = append(b, "&last_ad="...)
		b = strconv.AppendInt(b, int64(lastAd), 10)
		b = append(b, "\r\n"...)
	}
	if r.kind != kPost {
		return append(b, "\r\n"...)
	}
	// urlroot=/file_set/&dir=NNNNN&class=C&num=Y&client=K
	var body [96]byte
	f := append(body[:0], "urlroot=/file_set/&dir="...)
	f = fileset.AppendPadded(f, r.dir, 5)
	f = append(f, "&class="...)
	f = strconv.AppendInt(f, int64(r.class), 10)
	f = append(f, "&num="...)
	f = strconv.AppendInt(f, int64(r.num), 10)
	f = append(f, "&client="...)
	f = strconv.AppendInt(f, int64(client), 10)
	b = append(b, "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(append(b, "\r\n\r\n"...), f...)
	return b
}
