package sweep

import (
	"strings"
	"testing"
	"time"
)

func TestParseCount(t *testing.T) {
	for s, want := range map[string]int{"64": 64, "1K": 1024, "8k": 8192, "256K": 262144, "1M": 1048576, "1000": 1000} {
		if n, err := ParseCount(s); err != nil || n != want {
			t.Errorf("ParseCount(%q) = %d, %v, want %d", s, n, err, want)
		}
		if want != 1000 && CountLabel(want) != strings.ToUpper(s) {
			t.Errorf("CountLabel(%d) = %q, want %q", want, CountLabel(want), strings.ToUpper(s))
		}
	}
	for _, s := range []string{"", "0", "2M", "1G", "-5", "x"} {
		if _, err := ParseCount(s); err == nil {
			t.Errorf("ParseCount(%q): want an error", s)
		}
	}
}

func TestParseConnsFlags(t *testing.T) {
	c, err := ParseConnsFlags([]string{"--counts", "64,64K", "--servers", "native,nginx", "--loads", "open", "--open-rate", "5000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Counts) != 2 || c.Counts[1] != 65536 || strings.Join(c.Servers, ",") != "native,nginx" || c.Loads[0] != LoadOpen || c.OpenRate != 5000 {
		t.Errorf("parsed %+v", c)
	}
	for _, args := range [][]string{{"--counts", "3G"}, {"--servers", "fasthttp"}, {"--loads", "half"}, {"--open-rate", "0"}} {
		if _, err := ParseConnsFlags(args, nil); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

// TestConnsMarkdown: a row per measured cell, in count order, the stop
// reasons, and a plot input with the counts as ticks on a log axis.
func TestConnsMarkdown(t *testing.T) {
	cfg := DefaultConnsConfig()
	cfg.Counts, cfg.Servers, cfg.Command = []int{64, 65536}, []string{"native", "nginx"}, "go run ./cmd/bench conns"
	r := &ConnsResults{Config: &cfg, Finished: time.Unix(0, 0), FDLimit: 20000, Stopped: map[string]string{"nginx": "from 64K on: a descriptor a connection", "native closed": "from 1M on: no responses"}}
	r.Samples = []ConnsSample{
		{ConnsKey: ConnsKey{"native", LoadClosed, 64}, ReqPerSec: 300000, CPUPerReq: 6.1, P50: 200, P99: 900, P999: 1500, IdleRSS: 100 << 20, PeakRSS: 110 << 20},
		{ConnsKey: ConnsKey{"nginx", LoadClosed, 64}, ReqPerSec: 130000, P50: 450, P99: 2100, P999: 3000},
		{ConnsKey: ConnsKey{"native", LoadClosed, 65536}, ReqPerSec: 250000, P99: 2.5e6, IdleRSS: 100 << 20, PeakRSS: 220 << 20},
		{ConnsKey: ConnsKey{"native", LoadOpen, 65536}, ReqPerSec: 10000, P99: 800, Interval: 6.5536},
	}
	var b strings.Builder
	r.Markdown(&b, "conns.svg")
	md := b.String()
	for _, want := range []string{
		"| 64 | percore native | 300,000 | 6.10 | 0.00 | 200 µs | 900 µs | 1.5 ms | 0 |",
		"| 64 | nginx | 130,000 |",
		"| 64K | percore native | 250,000 | 0.00 | 0.00 | – | 2.50 s |",
		"| 220 MiB | 1.9 KiB |",
		"| 64K, each every 6.6 s | percore native | 10,000 |",
		"### Open loop, 10000 requests/s in total",
		"- nginx: from 64K on: a descriptor a connection",
		"- percore native, closed loop: from 1M on: no responses",
		"![closed-loop requests/s per connection count](conns.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "| 64 | percore native") > strings.Index(md, "| 64K | percore native") {
		t.Error("rows not in count order")
	}
	in := r.plotInput()
	if len(in.XTicks) != 2 || in.XTicks[0].Value != 6 || in.XTicks[1].Label != "64K" {
		t.Errorf("x ticks %+v", in.XTicks)
	}
	if len(in.Series) != 2 || len(in.Series[0].Points) != 2 || in.Series[0].Points[1].X != 16 {
		t.Errorf("series %+v", in.Series)
	}
}

func TestStatusRSS(t *testing.T) {
	if got := statCPU("12 (my (odd) name) S 1 12 12 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0"); got != 300 {
		t.Errorf("statCPU = %d, want 250+50", got)
	}
	if got := statusRSS("Name:\thttpd\nVmPeak:\t  9 kB\nVmRSS:\t  2048 kB\n"); got != 2<<20 {
		t.Errorf("statusRSS = %d, want 2 MiB", got)
	}
}

func TestConnsTimeout(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{64, 16 * time.Second}, {64 << 10, 16 * time.Second}, {256 << 10, 31457280 * time.Microsecond}, {1 << 20, 125829120 * time.Microsecond}} {
		if got := ConnsTimeout(c.n); got != c.want {
			t.Errorf("ConnsTimeout(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	cfg := DefaultConnsConfig()
	if cfg.timeout(256<<10) != ConnsTimeout(256<<10) {
		t.Errorf("default timeout %v", cfg.timeout(256<<10))
	}
	cfg.Timeout = 5 * time.Second
	if cfg.timeout(256<<10) != 5*time.Second {
		t.Errorf("--timeout 5s gave %v", cfg.timeout(256<<10))
	}
}

// TestConnsIdleTimeout: the server keeps an open-loop connection between two
// of its requests (1M at 10,000 req/s: one every 105 s, past httpd's 60 s).
func TestConnsIdleTimeout(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1 << 10, time.Minute + 204800*time.Microsecond}, {1 << 20, time.Minute + 209715200*time.Microsecond}} {
		got := connsIdleTimeout(c.n, 10000)
		if got != c.want {
			t.Errorf("connsIdleTimeout(%d, 10000) = %v, want %v", c.n, got, c.want)
		}
		if gap := time.Duration(float64(c.n) / 10000 * float64(time.Second)); got <= gap {
			t.Errorf("%d connections: timeout %v, not past the %v between requests", c.n, got, gap)
		}
	}
}
