package httpd

// splitTarget splits a request-target into its raw path and query (RFC 9112
// 3.2). Origin-form ("/p?q") and absolute-form ("http://host/p?q") are
// accepted; authority-form, and asterisk-form other than "OPTIONS *" (which
// serve answers before), are not (ok is false).
func splitTarget(t []byte) (path, query []byte, ok bool) {
	if len(t) == 0 {
		return nil, nil, false
	}
	if t[0] != '/' {
		var rest []byte
		switch {
		case len(t) > 7 && equalFold(t[:7], "http://"):
			rest = t[7:]
		case len(t) > 8 && equalFold(t[:8], "https://"):
			rest = t[8:]
		default:
			return nil, nil, false
		}
		i := 0
		for i < len(rest) && rest[i] != '/' && rest[i] != '?' {
			i++
		}
		t = rest[i:]
		if len(t) == 0 || t[0] != '/' {
			// "http://host" or "http://host?q": the path is "/".
			if len(t) > 0 {
				return slash, t[1:], true
			}
			return slash, nil, true
		}
	}
	for i, b := range t {
		switch b {
		case '?':
			return t[:i], t[i+1:], true
		case '#':
			return nil, nil, false // a fragment is never sent (RFC 9110 4.2.4)
		}
	}
	return t, nil, true
}

var slash = []byte("/")

// needsClean reports whether cleanPath would change or refuse raw: the common
// path ("/a/b.css") is used as it is, without a copy.
func needsClean(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '/' {
		return true
	}
	for i, b := range raw {
		switch b {
		case '%', '\\', 0:
			return true
		case '/':
			if i+1 < len(raw) && (raw[i+1] == '/' || raw[i+1] == '.') {
				return true
			}
		}
	}
	return false
}

// cleanPath percent-decodes raw into dst and normalises it: "//" and "."
// segments are removed; ".." segments, encoded "/" or "\", a raw "\" and NUL
// (raw or %00) are refused (ok is false, answered 400). The result is what the
// router and the static cache are keyed by, so no path can name anything
// outside the docroot.
func cleanPath(dst, raw []byte) ([]byte, bool) {
	dst = dst[:0]
	for i := 0; i < len(raw); i++ {
		b := raw[i]
		switch b {
		case '%':
			if i+2 >= len(raw) {
				return dst, false
			}
			hi, lo := unhex(raw[i+1]), unhex(raw[i+2])
			if hi < 0 || lo < 0 {
				return dst, false
			}
			b = byte(hi<<4 | lo)
			if b == 0 || b == '/' || b == '\\' {
				return dst, false
			}
			i += 2
		case '\\', 0:
			return dst, false
		}
		dst = append(dst, b)
	}
	if len(dst) == 0 || dst[0] != '/' {
		return dst, false
	}
	// Normalise in place: the output never runs ahead of the input.
	p := dst
	out := dst[:0]
	for i := 0; i < len(p); {
		j := i + 1
		for j < len(p) && p[j] != '/' {
			j++
		}
		seg := p[i+1 : j]
		last := j == len(p)
		switch {
		case len(seg) == 0 || (len(seg) == 1 && seg[0] == '.'):
			if last {
				out = append(out, '/')
			}
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			return out, false
		default:
			out = append(out, '/')
			out = append(out, seg...)
		}
		i = j
	}
	if len(out) == 0 {
		out = append(out, '/')
	}
	return out, true
}
