package httpd

import "time"

const httpTimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT" // IMF-fixdate, RFC 9110 5.6.7

const (
	serverLine = "Server: percore\r\n"
	helloTail  = "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
)

// dateBlock holds one second's worth of a shard's prepared response prefixes,
// all carrying that second's Date. A new block is made each second and the old
// one is never written again, so slices handed to a stack stay valid for as
// long as it keeps them.
type dateBlock struct {
	sec   int64
	date  []byte // "Date: ...\r\n"
	ok    []byte // "HTTP/1.1 200 OK\r\nServer..\r\nDate..\r\n"
	hello []byte // ok + helloTail: the whole built-in "/" response
	nm    []byte // 304 prefix
	clf   []byte // "[02/Jan/2006:15:04:05 +0000]" for the access log
}

func newDateBlock(now time.Time) *dateBlock {
	now = now.UTC()
	b := make([]byte, 0, 384)
	d := &dateBlock{sec: now.Unix()}

	b = append(b, "HTTP/1.1 200 OK\r\n"+serverLine...)
	ds := len(b)
	b = append(b, "Date: "...)
	b = now.AppendFormat(b, httpTimeFormat)
	b = append(b, "\r\n"...)
	d.date = b[ds:len(b):len(b)]
	d.ok = b[:len(b):len(b)]
	b = append(b, helloTail...)
	d.hello = b[:len(b):len(b)]

	s := len(b)
	b = append(b, "HTTP/1.1 304 Not Modified\r\n"+serverLine...)
	b = append(b, d.date...)
	d.nm = b[s:len(b):len(b)]

	s = len(b)
	b = now.AppendFormat(b, "[02/Jan/2006:15:04:05 +0000]")
	d.clf = b[s:len(b):len(b)]
	return d
}

// parseHTTPDate parses an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") into
// Unix seconds without allocating. The obsolete formats are not accepted; a
// conditional request carrying one is answered in full, which is always safe.
func parseHTTPDate(b []byte) (int64, bool) {
	if len(b) != 29 || b[3] != ',' || b[4] != ' ' || b[7] != ' ' || b[11] != ' ' ||
		b[16] != ' ' || b[19] != ':' || b[22] != ':' || b[25] != ' ' || string(b[26:]) != "GMT" {
		return 0, false
	}
	day, ok1 := atoiFixed(b[5:7])
	year, ok2 := atoiFixed(b[12:16])
	hh, ok3 := atoiFixed(b[17:19])
	mm, ok4 := atoiFixed(b[20:22])
	ss, ok5 := atoiFixed(b[23:25])
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 {
		return 0, false
	}
	month := 0
	for i, m := range months {
		if string(b[8:11]) == m {
			month = i + 1
			break
		}
	}
	if month == 0 {
		return 0, false
	}
	return time.Date(year, time.Month(month), day, hh, mm, ss, 0, time.UTC).Unix(), true
}

var months = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

func atoiFixed(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
