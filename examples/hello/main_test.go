package main

import (
	"io"
	"net/http"
	"testing"

	"percore"
)

func TestHello(t *testing.T) {
	s := newServer()
	o := percore.DefaultOptions()
	o.Port, o.SMP, o.StatsInterval = 0, 1, 0
	if err := s.Start(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(); <-s.Done() })
	resp, err := http.Get("http://" + s.Addr().String() + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from percore\n" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}
