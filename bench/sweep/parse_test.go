package sweep

import (
	"strings"
	"testing"
)

const wrkSample = `Running 5s test @ http://198.18.3.1:18081/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   857.09us  131.44us   1.02s    85.17%
    Req/Sec    62.82k     8.28k   68.87k    90.00%
  Latency Distribution
     50%  831.00us
     75%  898.00us
     90%    1.05ms
     99%    2.50s
  314904 requests in 5.01s, 38.16MB read
  Socket errors: connect 1, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 10
Requests/sec:  62855.78
Transfer/sec:      7.62MB
`

func TestParseWrk(t *testing.T) {
	s, err := ParseWrk([]byte(wrkSample))
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{Requests: 314904, ReqPerSec: 62855.78, Errors: 16,
		P50: 831, P90: 1050, P99: 2.5e6, P999: -1, Max: 1.02e6}
	if s != want {
		t.Errorf("ParseWrk:\n got %+v\nwant %+v", s, want)
	}
}

func TestParseWrkRejects(t *testing.T) {
	for name, out := range map[string]string{
		"empty":       "",
		"usage":       "Usage: wrk <options> <url>\n  Options:\n",
		"no rate":     "  10 requests in 1.00s, 1KB read\n",
		"bad unit":    "    Latency   1us  1us  1.0xs  1%\n  10 requests in 1.00s, 1KB read\nRequests/sec: 10\n",
		"bad errors":  "  Socket errors: connect x, read 0\n",
		"bad percent": "     50%  abcus\n",
	} {
		if _, err := ParseWrk([]byte(out)); err == nil {
			t.Errorf("%s: ParseWrk accepted %q", name, out)
		}
	}
}

const wreckSample = `{
  "server": "198.18.3.1:18081", "smp": 1, "conns": 4, "pipeline": 1, "keepalive": true,
  "seconds": 0.300864504, "requests": 2791, "req_per_sec": 9276.601137367805,
  "bytes_read": 334920, "bytes_per_sec": 1113192.1364841366, "connects": 4,
  "errors": {"non2xx": 1, "malformed": 2, "oversized": 1, "timeout": 3, "reset": 0, "closed": 4, "connect": 0, "mismatch": 0},
  "latency_us": {"mean": 430.0, "p50": 97.151, "p90": 566.783, "p99": 6520.831, "p99_9": 31227.903, "max": 31244.287},
  "shards": []
}`

func TestParseWreck(t *testing.T) {
	s, err := ParseWreck([]byte(wreckSample))
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{Requests: 2791, ReqPerSec: 9276.601137367805, Errors: 10,
		P50: 97.151, P90: 566.783, P99: 6520.831, P999: 31227.903, Max: 31244.287}
	if s != want {
		t.Errorf("ParseWreck:\n got %+v\nwant %+v", s, want)
	}
	for _, bad := range []string{"", "wreck: connect refused", `{"seconds": 0}`} {
		if _, err := ParseWreck([]byte(bad)); err == nil {
			t.Errorf("ParseWreck accepted %q", bad)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	const stat = "cpu  10132153 290696 3084719 46828483 16683 0 25195 7 0 0\ncpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0\nintr 1\n"
	c, err := ParseProcStat([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	want := CPUTimes{User: 10132153, Nice: 290696, System: 3084719, Idle: 46828483, IOWait: 16683, IRQ: 0, SoftIRQ: 25195, Steal: 7}
	if c != want {
		t.Errorf("ParseProcStat:\n got %+v\nwant %+v", c, want)
	}
	if got, w := c.Busy(), uint64(10132153+290696+3084719+25195); got != w {
		t.Errorf("Busy = %d, want %d", got, w)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 x 5 6 7 8\n", "cpu 1 2 3\n"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("ParseProcStat accepted %q", strings.TrimSpace(bad))
		}
	}
}
