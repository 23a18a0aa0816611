package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPeersAnswerPipelined starts each peer in-process, sends three
// pipelined GET / and one GET /missing on one connection, and checks the
// four responses in order: 200 "hello" with percore's headers, then 404.
// SIGTERM on the signal channel stops the server.
func TestPeersAnswerPipelined(t *testing.T) {
	for name, serve := range map[string]func(options, <-chan os.Signal) error{"fasthttp": serveFasthttp, "gnet": serveGnet} {
		t.Run(name, func(t *testing.T) {
			o := options{port: freePort(t), smp: 2}
			sig := make(chan os.Signal, 1)
			done := make(chan error, 1)
			go func() { done <- serve(o, sig) }()
			addr := "127.0.0.1:" + strconv.Itoa(o.port)
			var c net.Conn
			var err error
			for range 100 {
				if c, err = net.Dial("tcp4", addr); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("dial %s: %v", addr, err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			req := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
			if _, err := io.WriteString(c, req+req+req+"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			var got []int
			for i := range 4 {
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				got = append(got, resp.StatusCode)
				if resp.StatusCode == 200 && (string(body) != "hello" || resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("Date") == "") {
					t.Errorf("response %d: body %q, headers %v", i, body, resp.Header)
				}
			}
			if want := []int{200, 200, 200, 404}; !slices.Equal(got, want) {
				t.Errorf("statuses %v, want %v", got, want)
			}
			sig <- syscall.SIGTERM
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("stop: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("server did not stop on SIGTERM")
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags("gnet", []string{"--port", "8081", "--smp", "4", "--cpuset", "0-2,6"})
	if err != nil || o.port != 8081 || o.smp != 4 || !slices.Equal(o.cpuset, []int{0, 1, 2, 6}) {
		t.Errorf("parseFlags = %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--port", "0"}, {"--smp", "0"}, {"--cpuset", "3-1"}, {"--cpuset", "x"}, {"extra"}} {
		if _, err := parseFlags("gnet", bad); err == nil {
			t.Errorf("parseFlags accepted %q", bad)
		}
	}
}
