package main

import (
	"regexp"
	"strings"
	"testing"

	"percore/wreck"
)

// TestFlagHint: every setting wreck's validation names comes out as the
// flag that sets it.
func TestFlagHint(t *testing.T) {
	field := regexp.MustCompile(`\b(TLS|Native)\.[A-Z]|\b(SMP|Conns|Reqs|Rate|ConnectRate|KeepAlive|Pipeline|Duration|Timeout|Path|MaxHead|Headers|CPUSet|Server|CheckSeq)\b`)
	for _, args := range [][]string{
		{"--conn", "1", "--smp", "2"},
		{"--reqs", "1", "--smp", "2"},
		{"--keepalive=false", "--pipeline", "2"},
		{"--connect-rate", "5", "--keepalive=false"},
		{"--conn", "2000000"},
		{"--path", "x"},
		{"--header", "x"},
		{"--timeout", "0s"},
		{"--duration", "0s"},
		{"--tls-insecure"},
		{"--tls", "--rate", "5"},
		{"--tls", "--check-seq"},
		{"--tls", "--tls-curves", "x448"},
		{"--tls", "--tls-insecure", "--tls-ca", "ca.pem"},
	} {
		_, _, err := wreck.ParseFlags(append([]string{"--server", "127.0.0.1:1"}, args...))
		if err == nil {
			t.Errorf("%v: accepted", args)
			continue
		}
		msg := flagHint(err).Error()
		if !strings.HasPrefix(msg, "--") || field.MatchString(msg) {
			t.Errorf("%v: %q: want the flags' names", args, msg)
		}
	}
}
