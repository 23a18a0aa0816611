package wreck

import (
	"strings"
)

// buildRequest returns the bytes of one GET request and, when seq is set, the
// offset of its 16 sequence-number digits (else -1).
func buildRequest(c *Config, seq bool) ([]byte, int) {
	var b strings.Builder
	b.WriteString("GET ")
	b.WriteString(c.Path)
	b.WriteString(" HTTP/1.1\r\n")
	hasHost := false
	for _, h := range c.Headers {
		name, _, _ := strings.Cut(h, ":")
		if strings.EqualFold(strings.TrimSpace(name), "host") {
			hasHost = true
		}
	}
	if !hasHost {
		b.WriteString("Host: ")
		b.WriteString(c.Server)
		b.WriteString("\r\n")
	}
	for _, h := range c.Headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	if !c.KeepAlive {
		b.WriteString("Connection: close\r\n")
	}
	off := -1
	if seq {
		b.WriteString("X-Wreck-Seq: ")
		off = b.Len()
		b.WriteString("0000000000000000\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String()), off
}

// stampSeq writes v as 16 lower-case hex digits into b.
func stampSeq(b []byte, v uint64) {
	const hex = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[i] = hex[v&0xf]
		v >>= 4
	}
}
