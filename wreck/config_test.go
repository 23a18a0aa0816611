package wreck

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	cfg, jsonOut, err := ParseFlags([]string{
		"--server", "127.0.0.1:8080", "--smp", "1", "--cpuset", "0", "--conn", "10",
		"--duration", "3s", "--reqs", "500", "--pipeline", "4", "--path", "/x?y=1",
		"--header", "A: 1", "--header", "B: 2", "--rate", "1000", "--timeout", "250ms",
		"--check-seq", "--max-head", "4096", "--json",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Server: "127.0.0.1:8080", SMP: 1, CPUSet: []int{0}, Conns: 10, Duration: 3 * time.Second,
		Reqs: 500, Pipeline: 4, Path: "/x?y=1", Headers: []string{"A: 1", "B: 2"}, KeepAlive: true,
		Rate: 1000, Timeout: 250 * time.Millisecond, CheckSeq: true, MaxHead: 4096,
	}
	if !jsonOut || !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v json %v\nwant %+v", cfg, jsonOut, want)
	}
}

// --cpuset takes the server's grammar (shard.ParseCPUSet): sorted and
// distinct, and a CPU number or range out of bounds is an error.
func TestParseFlagsCPUSet(t *testing.T) {
	for in, want := range map[string]string{"0": "[0]", "0-1,1": "[0 1]", "1, 0": "[0 1]"} {
		cfg, _, err := ParseFlags([]string{"--server", "127.0.0.1:1", "--smp", "1", "--cpuset", in})
		if err != nil || fmt.Sprint(cfg.CPUSet) != want {
			t.Errorf("%q: %v %v, want %s", in, cfg.CPUSet, err, want)
		}
	}
	for _, in := range []string{"a", "3-1", "1-", "1,,2", "70000", "0-100000"} {
		if _, _, err := ParseFlags([]string{"--server", "127.0.0.1:1", "--cpuset", in}); err == nil || !strings.Contains(err.Error(), "--cpuset") {
			t.Errorf("%q: error %v, want one about --cpuset", in, err)
		}
	}
}

func TestBuildRequest(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Server, cfg.Path = "h:1", "/p"
	req, off := buildRequest(&cfg, false)
	if string(req) != "GET /p HTTP/1.1\r\nHost: h:1\r\n\r\n" || off != -1 {
		t.Fatalf("%q %d", req, off)
	}

	cfg.Headers, cfg.KeepAlive = []string{"host: other", "X-A: b"}, false
	req, off = buildRequest(&cfg, true)
	want := "GET /p HTTP/1.1\r\nhost: other\r\nX-A: b\r\nConnection: close\r\nX-Wreck-Seq: 0000000000000000\r\n\r\n"
	if string(req) != want {
		t.Fatalf("got %q\nwant %q", req, want)
	}
	stampSeq(req[off:], 0xabc)
	if string(req[off:off+16]) != "0000000000000abc" {
		t.Fatalf("stamped %q", req[off:off+16])
	}
}
