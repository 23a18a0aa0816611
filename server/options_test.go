package server

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"percore/shard"
)

func TestParseFlagsDefaults(t *testing.T) {
	o, err := ParseFlags(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 10000 || o.Address.String() != "0.0.0.0" || o.NetworkStack != "posix" || o.SMP != 0 ||
		o.CPUSet != nil || o.MaxBody != 1<<20 || o.PollMode || o.StopTimeout != 5*time.Second ||
		o.BodyTimeout != 60*time.Second {
		t.Fatalf("defaults = %+v", o)
	}
}

func TestParseFlagsSeastarNames(t *testing.T) {
	o, err := ParseFlags([]string{"--smp", "2", "--cpuset", "0-1", "--port", "8080", "--address", "::1",
		"--poll-mode", "--docroot", "/srv", "--access-log", "/tmp/a.log", "--max-body", "10",
		"--header-timeout", "200ms", "--idle-timeout", "1s", "--body-timeout", "30s", "--network-stack", "posix"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.SMP != 2 || len(o.CPUSet) != 2 || o.Port != 8080 || o.Address.String() != "::1" || !o.PollMode ||
		o.Docroot != "/srv" || o.AccessLog != "/tmp/a.log" || o.MaxBody != 10 ||
		o.HeaderTimeout != 200*time.Millisecond || o.IdleTimeout != time.Second || o.BodyTimeout != 30*time.Second {
		t.Fatalf("parsed = %+v", o)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	cases := map[string][]string{
		"not defined":         {"--bogus"},
		"--smp -1":            {"--smp", "-1"},
		"--cpuset":            {"--cpuset", "3-1"},
		"--port 70000":        {"--port", "70000"},
		"--address":           {"--address", "nowhere"},
		"needs --iface":       {"--network-stack", "native"},
		"--network-stack":     {"--network-stack", "dpdk"},
		"--max-body":          {"--max-body", "-5"},
		"--header-timeout":    {"--header-timeout", "0s"},
		"--body-timeout":      {"--body-timeout", "-1s"},
		"invalid value":       {"--idle-timeout", "soon"},
		"unexpected argument": {"extra"},
	}
	for want, args := range cases {
		_, err := ParseFlags(args, nil)
		if err == nil {
			t.Errorf("%v: no error", args)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: error %q, want one line containing %q", args, msg, want)
		}
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := ParseFlags([]string{"--help"}, &out); !errors.Is(err, ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	if !strings.Contains(out.String(), "-smp") {
		t.Fatalf("usage lacks the flags: %q", out.String())
	}
}

func TestMainBadFlagExits2(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main("httpd", []string{"--smp", "x"}, &stderr, nil, nil); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.HasPrefix(stderr.String(), "httpd: ") {
		t.Fatalf("stderr %q, want one line", stderr.String())
	}
}

// Each counter of the glue declares its kind (drop, error, gauge, count).
func TestCountersDeclareKind(t *testing.T) {
	for _, v := range []any{NativeStats{}, PosixStats{}, TLSStats{}} {
		if err := shard.CheckFields(v); err != nil {
			t.Error(err)
		}
	}
}

// The TLS flags: the certificate needs its key, --tls-port may not be a
// --port, and the native stack serves TLS on a port it is given.
func TestParseFlagsTLS(t *testing.T) {
	o, err := ParseFlags([]string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-port", "8443"}, nil)
	if err != nil || o.TLS != (TLSFiles{Cert: "c.pem", Key: "k.pem"}) || o.TLSPort != 8443 {
		t.Fatalf("%+v %v", o.TLS, err)
	}
	if o, _ := ParseFlags([]string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, nil); o.TLSPort != -1 {
		t.Fatalf("TLSPort %d without --tls-port, want -1 (TLS on --port)", o.TLSPort)
	}
	native := []string{"--network-stack", "native", "--lab", "--tls-cert", "c.pem", "--tls-key", "k.pem"}
	if _, err := ParseFlags(append(native, "--tls-port", "10443"), nil); err != nil {
		t.Fatalf("native with TLS: %v", err)
	}
	for _, args := range [][]string{
		append(native, "--tls-port", "0"),
		append(native, "--port", "10000,10443", "--tls-port", "10443"),
		{"--tls-cert", "c.pem"},
		{"--tls-port", "8443"},
		{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--port", "8443", "--tls-port", "8443"},
		{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-port", "70000"},
	} {
		if _, err := ParseFlags(args, nil); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line", args, err)
		}
	}
}
