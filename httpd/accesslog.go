package httpd

import "strconv"

// logRequest appends one Common Log Format line to the shard's buffer:
//
//	198.18.0.2 - - [30/Nov/2026:22:07:07 +0000] "GET / HTTP/1.1" 200 5
//
// It appends into a reused buffer (no allocation once the buffer has grown);
// Tick writes the buffer out. Past maxLogBuf lines are dropped and counted.
func (s *Server) logRequest(c *Conn, status, bodyLen int) {
	if len(s.logBuf) >= maxLogBuf {
		s.stats.LogDropped++
		return
	}
	b := s.logBuf
	if a := c.remote.Addr(); a.IsValid() {
		b = a.AppendTo(b)
	} else {
		b = append(b, '-')
	}
	b = append(b, " - - "...)
	b = append(b, s.date.clf...)
	b = append(b, " \""...)
	if c.h.lineEnd >= 2 && c.r+c.h.lineEnd <= len(c.in) {
		b = appendEscaped(b, c.in[c.r:c.r+c.h.lineEnd-2])
	} else {
		b = append(b, '-')
	}
	b = append(b, "\" "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	if bodyLen > 0 {
		b = strconv.AppendInt(b, int64(bodyLen), 10)
	} else {
		b = append(b, '-')
	}
	s.logBuf = append(b, '\n')
}

// appendEscaped writes a request line with '"', '\' and bytes outside
// printable ASCII escaped as \xHH, so a log line cannot be forged.
func appendEscaped(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	clean := true
	for _, ch := range s {
		if ch < ' ' || ch >= 0x7f || ch == '"' || ch == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return append(b, s...)
	}
	for _, ch := range s {
		if ch < ' ' || ch >= 0x7f || ch == '"' || ch == '\\' {
			b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
			continue
		}
		b = append(b, ch)
	}
	return b
}
