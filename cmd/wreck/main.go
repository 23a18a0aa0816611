// Command wreck is percore's HTTP/1.1 load generator; see package wreck.
//
//	wreck --server 127.0.0.1:8080 --smp 2 --conn 64 --duration 10s [--pipeline 16] [--json]
package main

import (
	"errors"
	"os"
	"strings"

	"percore/wreck"
)

func main() {
	os.Exit(wreck.Main(os.Args[1:], os.Stdout, os.Stderr, flagHint))
}

// flagNames puts, in a wreck.ConfigError, the flag that sets each setting
// in its place: longer names first, so that a setting's name inside
// another's is not taken for it.
var flagNames = strings.NewReplacer(
	"TLS.ServerName", "--tls-server-name",
	"TLS.Insecure", "--tls-insecure",
	"TLS.Enabled", "--tls",
	"TLS.Resume", "--tls-resume",
	"TLS.Curves", "--tls-curves",
	"TLS.CA", "--tls-ca",
	"Native.PortLo..PortHi", "--source-ports",
	"Native.Enabled", "--network-stack native",
	"Native.BusyPoll", "--busy-poll",
	"Native.RSSTable", "--rss-table",
	"Native.RSSKey", "--rss-key",
	"Native.Frames", "--xdp-frames",
	"Native.Netns", "--netns",
	"Native.Iface", "--iface",
	"StaticOnly", "--specweb-static-only",
	"Workload", "--workload",
	"FileSet", "--file-set",
	"Sources", "--host-ipv4-addr",
	"Warmup", "--warmup",
	"ConnectRate", "--connect-rate",
	"KeepAlive", "--keepalive",
	"CheckSeq", "--check-seq",
	"Duration", "--duration",
	"Pipeline", "--pipeline",
	"Headers", "--header",
	"MaxHead", "--max-head",
	"Timeout", "--timeout",
	"CPUSet", "--cpuset",
	"Server", "--server",
	"Conns", "--conn",
	"Reqs", "--reqs",
	"Rate", "--rate",
	"Path", "--path",
	"SMP", "--smp",
)

// flagHint words a wreck.ConfigError in flags.
func flagHint(err error) error {
	var ce *wreck.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	return errors.New(flagNames.Replace(ce.Error()))
}
