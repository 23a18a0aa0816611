package httpd

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// staticFile is one docroot file's prepared response, built at start-up and
// shared read-only by all shards. A response is sent as the shard's status
// prefix (status line, Server, Date), an optional Connection line, and one of
// the tails below, all without copying.
type staticFile struct {
	full    []byte // header fields after Date, blank line, body
	headLen int    // full[:headLen] is the HEAD response tail
	nm      []byte // 304 tail: validators, Content-Length, blank line
	etag    []byte // with quotes
	mtime   int64  // Unix seconds, compared with If-Modified-Since
	size    int
}

// loadDocroot reads every regular file under root into memory. Symbolic links
// are not followed, so nothing outside root is ever served.
func (s *Site) loadDocroot(root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("docroot %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("docroot: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("docroot %s: not a directory", root)
	}
	return filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("load docroot: %w", err)
		}
		if p != abs && strings.HasPrefix(d.Name(), ".") {
			// Dotfiles and dot-directories (.git, .htpasswd, .env) are
			// never served, as nginx setups commonly deny them.
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // directories are walked; links, devices and sockets skipped
		}
		rel, err := filepath.Rel(abs, p)
		if err != nil {
			return fmt.Errorf("load docroot: %w", err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("load docroot: %w", err)
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("load docroot: %w", err)
		}
		key := "/" + filepath.ToSlash(rel)
		f := newStaticFile(data, info.ModTime(), contentType(p))
		s.static[key] = f
		if path.Base(key) == "index.html" {
			dir := path.Dir(key)
			if dir == "/" {
				s.static["/"] = f
			} else {
				s.static[dir+"/"] = f
				s.dirs[dir] = struct{}{}
			}
		}
		return nil
	})
}

func newStaticFile(data []byte, mod time.Time, ctype string) *staticFile {
	h := fnv.New64a()
	h.Write(data)
	etag := `"` + strconv.FormatUint(h.Sum64(), 16) + `"`
	lm := mod.UTC().Format(httpTimeFormat)
	validators := "ETag: " + etag + "\r\nLast-Modified: " + lm + "\r\n"
	cl := "Content-Length: " + strconv.Itoa(len(data)) + "\r\n"
	head := "Content-Type: " + ctype + "\r\n" + cl + validators + "\r\n"
	full := make([]byte, 0, len(head)+len(data))
	full = append(full, head...)
	full = append(full, data...)
	return &staticFile{
		full:    full,
		headLen: len(head),
		nm:      []byte(validators + cl + "\r\n"),
		etag:    []byte(etag),
		mtime:   mod.Unix(),
		size:    len(data),
	}
}

// notModified applies RFC 9110 13.1.2 and 13.1.3: If-None-Match (weak
// comparison) decides when present; otherwise If-Modified-Since.
func (f *staticFile) notModified(inm, ims []byte, hasINM, hasIMS bool) bool {
	if hasINM {
		return etagMatch(inm, f.etag)
	}
	if hasIMS {
		t, ok := parseHTTPDate(ims)
		return ok && f.mtime <= t
	}
	return false
}

// etagMatch reports whether the If-None-Match list matches etag, comparing
// weakly (a W/ prefix is ignored).
func etagMatch(list, etag []byte) bool {
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
