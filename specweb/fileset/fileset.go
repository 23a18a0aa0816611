// Package fileset is what a SPECweb99 server and client agree on about the
// file set: how many directories a run uses, each file's size and contents,
// the CAD tags and the ads' paths. It imports no server code, so the load
// generator can check responses against it.
package fileset

import (
	"fmt"
	"slices"
	"strconv"
)

const (
	Classes        = 4                     // file classes per directory
	FilesPerDir    = 9                     // files per class
	FilesPerDirAll = Classes * FilesPerDir // files per directory
)

// classBase is each class's base size; file y of class c has
// base[c]*(y+1)/10 bytes.
var classBase = [Classes]int{1024, 10240, 102400, 1024000}

// Dirs is the number of directories a run for conns connections uses:
// int(25 + (400000/122000) * conns / 5).
func Dirs(conns int) int {
	return int(25 + (400000.0/122000.0)*float64(conns)/5)
}

// FileSize is the size in bytes of file num (0..8) of class (0..3).
func FileSize(class, num int) int { return classBase[class] * (num + 1) / 10 }

// DirBytes is the size of one directory's 36 files.
func DirBytes() int64 {
	var n int64
	for c := range Classes {
		for y := range FilesPerDir {
			n += int64(FileSize(c, y))
		}
	}
	return n
}

// FilePath is a file's path below the file set root, "file_set/dir00012/class1_3".
func FilePath(dir, class, num int) string {
	return fmt.Sprintf("file_set/dir%05d/class%d_%d", dir, class, num)
}

// Header appends the first line of every file: what it is and how long.
func Header(b []byte, dir, class, num int) []byte {
	b = append(b, "SPECweb99 "...)
	b = AppendPath(b, dir, class, num)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(FileSize(class, num)), 10)
	return append(b, '\n')
}

// AppendPath appends "file_set/dirNNNNN/classC_Y".
func AppendPath(b []byte, dir, class, num int) []byte {
	b = append(b, "file_set/dir"...)
	b = AppendPadded(b, dir, 5)
	b = append(b, "/class"...)
	b = append(b, byte('0'+class), '_', byte('0'+num))
	return b
}

// AppendPadded appends n in decimal, zero-padded to width digits.
func AppendPadded(b []byte, n, width int) []byte {
	var d [20]byte
	i := len(d)
	for n > 0 || i > len(d)-width {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[i:]...)
}

// The CAD tag: TagOpen, a 27-byte path, TagClose. Every path has the same
// length, so a rewrite never moves the bytes around it.
const (
	TagOpen  = `<!WEB99CAD><IMG SRC="`
	TagClose = `"><!/WEB99CAD>`
	PathLen  = len("/file_set/dir00000/class0_0")
	TagLen   = len(TagOpen) + PathLen + len(TagClose)
)

// Tags is how many CAD tags file num of class holds: num+1 in classes 1 and
// 2, none in the others.
func Tags(class, num int) int {
	if class == 1 || class == 2 {
		return num + 1
	}
	return 0
}

// filler is the alphabet of the body: no '<', so only tags start with it.
const filler = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ."

// AppendFile appends the contents of a file: the header line, then filler
// from a generator seeded by the file's place (lines of 63 characters), then
// the CAD tags, each pointing at an ad chosen by its place.
func AppendFile(b []byte, dir, class, num int) []byte {
	start := len(b)
	size := FileSize(class, num)
	b = Header(b, dir, class, num)
	h := len(b) - start
	b = slices.Grow(b, size-h)[:start+size]
	f := b[start:]
	x := uint64(dir)<<8 | uint64(class)<<4 | uint64(num) + 0x9e3779b97f4a7c15
	for i := h; i < size; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i+8 <= size {
			g := f[i : i+8 : i+8]
			g[0], g[1], g[2], g[3] = filler[x&63], filler[x>>8&63], filler[x>>16&63], filler[x>>24&63]
			g[4], g[5], g[6], g[7] = filler[x>>32&63], filler[x>>40&63], filler[x>>48&63], filler[x>>56&63]
			continue
		}
		for k, j := 0, i; j < size; k, j = k+1, j+1 {
			f[j] = filler[(x>>(8*k))&63]
		}
	}
	for j := 63; j < size; j += 64 {
		if j >= h {
			f[j] = '\n'
		}
	}
	n := Tags(class, num)
	for k := range n {
		at := h + k*((size-h)/n)
		t := append(append(f[at:at], TagOpen...), AdPath((dir+k)%NumAds)...)
		_ = append(t, TagClose...)
	}
	return b
}

// NumAds is the number of records in Custom.Ads.
const NumAds = 360

// adPaths holds AdPath for every ad, built once.
var adPaths = func() (p [NumAds]string) {
	for n := range p {
		p[n] = "/" + FilePath(n/FilesPerDirAll, n%FilesPerDirAll/FilesPerDir, n%FilesPerDir)
	}
	return p
}()

// AdPath is the file ad n stands for: "/file_set/dir%05d/class%d_%d" with
// directory n/36, class (n%36)/9 and file n%9.
func AdPath(n int) string { return adPaths[n] }

// The scripts' paths, as SPECweb99 clients name them.
const (
	DynamicPath = "/specweb99-fcgi.pl"
	CGIPath     = "/specweb99-cgi.pl"
)

// FirstUser is the id of user 0; a user's id is FirstUser + its index.
const FirstUser = 10000

// MaxUsers keeps user ids to the 5 digits of a User.Personality record.
const MaxUsers = 90000

// A dynamic page is a server-generated prefix (AppendPagePrefix) that ends in PageBodyStart,
// the file (its CAD tags rewritten under ad rotation), then PageSuffix.
// A POST's page holds PostAnswer and the record's sequence number.
const (
	PageHead = "<html>\n<head><title>SPECweb99 Dynamic GET & POST Test</title></head>\n<body>\n" +
		"<p>SERVER_SOFTWARE = percore\n<p>REMOTE_ADDR = "
	PageScript    = "\n<p>SCRIPT_NAME = "
	PageQuery     = "\n<p>QUERY_STRING = "
	PageBodyStart = "\n<pre>\n"
	PageSuffix    = "</pre>\n</body>\n</html>\n"
	PostAnswer    = "POST logged as record "
)

// AppendPagePrefix appends a dynamic page's prefix: the client's address,
// the script and the query, as text.
func AppendPagePrefix(b []byte, remote, script, query string) []byte {
	b = append(append(b, PageHead...), remote...)
	b = append(append(b, PageScript...), script...)
	b = append(append(b, PageQuery...), query...)
	return append(b, PageBodyStart...)
}
