package httpd

import (
	"bytes"
	"mime"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// staticFile is one docroot file's prepared response, made by a file job and
// read-only from then on, so every connection of the shard sends it without
// copying. A response is sent as the shard's status prefix (status line,
// Server, Date), an optional Connection line, and one of the tails below.
//
// A file larger than the cache keeps (streamed) holds only its header: its
// body is read from disk in chunks for each response.
type staticFile struct {
	full     []byte // header fields after Date, blank line, body (streamed: no body)
	headLen  int    // full[:headLen] is the HEAD response tail
	nm       []byte // 304 tail: validators, Content-Length, blank line
	ctype    []byte // "Content-Type: ...\r\n", for 206 responses
	valid    []byte // "ETag: ...\r\nLast-Modified: ...\r\n", for 206 and 412
	etag     []byte // with quotes
	mtime    int64  // Unix seconds, compared with If-Modified-Since
	mtimeNs  int64  // the file's mtime as read, to tell a changed file during a stream
	size     int64
	rel      string // path below the docroot, for streamed reads
	streamed bool
}

// newStaticFile prepares the response of a file of size bytes; data is its
// body, nil when the file is streamed. The ETag is made from the size and
// mtime, as nginx makes it, so a streamed file has one without being read
// whole.
func newStaticFile(rel string, data []byte, size int64, mod time.Time) *staticFile {
	etag := `"` + strconv.FormatInt(mod.Unix(), 16) + "-" + strconv.FormatInt(size, 16) + `"`
	lm := mod.UTC().Format(httpTimeFormat)
	ctype := "Content-Type: " + contentType(rel) + "\r\n"
	validators := "ETag: " + etag + "\r\nLast-Modified: " + lm + "\r\n"
	cl := "Content-Length: " + strconv.FormatInt(size, 10) + "\r\n"
	head := ctype + cl + "Accept-Ranges: bytes\r\n" + validators + "\r\n"
	full := make([]byte, 0, len(head)+len(data))
	full = append(full, head...)
	full = append(full, data...)
	return &staticFile{
		full:     full,
		headLen:  len(head),
		nm:       []byte(validators + cl + "\r\n"),
		ctype:    []byte(ctype),
		valid:    []byte(validators),
		etag:     []byte(etag),
		mtime:    mod.Unix(),
		mtimeNs:  mod.UnixNano(),
		size:     size,
		rel:      rel,
		streamed: data == nil && size > 0,
	}
}

// notModified applies RFC 9110 13.1.2 and 13.1.3: If-None-Match (weak
// comparison) decides when present; otherwise If-Modified-Since.
func (f *staticFile) notModified(inm, ims []byte, hasINM, hasIMS bool) bool {
	if hasINM {
		return etagMatch(inm, f.etag, false)
	}
	if hasIMS {
		t, ok := parseHTTPDate(ims)
		return ok && f.mtime <= t
	}
	return false
}

// etagMatch reports whether the entity-tag list matches etag: weakly (a W/
// prefix is ignored) for If-None-Match, strongly (a weak tag never matches)
// for If-Match and If-Range (RFC 9110 8.8.3.2).
func etagMatch(list, etag []byte, strong bool) bool {
	for len(list) > 0 {
		var item []byte
		if i := bytes.IndexByte(list, ','); i >= 0 {
			item, list = list[:i], list[i+1:]
		} else {
			item, list = list, nil
		}
		item = trimOWS(item)
		if len(item) == 1 && item[0] == '*' {
			return true
		}
		if len(item) > 2 && item[0] == 'W' && item[1] == '/' {
			if strong {
				continue
			}
			item = item[2:]
		}
		if bytes.Equal(item, etag) {
			return true
		}
	}
	return false
}

var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".htm":   "text/html; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".json":  "application/json",
	".txt":   "text/plain; charset=utf-8",
	".xml":   "text/xml; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".jpg":   "image/jpeg",
	".jpeg":  "image/jpeg",
	".gif":   "image/gif",
	".webp":  "image/webp",
	".ico":   "image/x-icon",
	".pdf":   "application/pdf",
	".wasm":  "application/wasm",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".mp4":   "video/mp4",
	".gz":    "application/gzip",
}

// contentType picks a type by extension: the table above first, so the common
// types do not depend on the host's mime files, then the mime package.
func contentType(name string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
