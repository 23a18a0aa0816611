// Command json is a small JSON API on percore, and shows where blocking work
// goes: handlers run on the shards and must not block, so a goroutine of its
// own reads the system's load once a second (file I/O) and publishes an
// immutable snapshot that the handlers load without waiting.
//
//	go run ./examples/json --port 8080
//	curl http://127.0.0.1:8080/api/status
//	curl -d '{"numbers":[1,2,3.5]}' http://127.0.0.1:8080/api/sum
package main

import (
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"percore"
)

// status is one snapshot: written once by the refresher, then only read.
type status struct {
	Load    string    `json:"load"` // /proc/loadavg's first three fields
	Updated time.Time `json:"updated"`
	body    []byte    // the snapshot encoded once, served as is
}

// api holds the latest snapshot for every shard to read.
type api struct{ latest atomic.Pointer[status] }

// refresh does the blocking work off the shards: read, build a new
// snapshot, publish it with one atomic store. It runs until stop closes.
func (a *api) refresh(every time.Duration, stop <-chan struct{}) {
	for {
		a.publish(readLoad())
		select {
		case <-stop:
			return
		case <-time.After(every):
		}
	}
}

func (a *api) publish(load string) {
	st := &status{Load: load, Updated: time.Now().UTC()}
	st.body, _ = json.Marshal(st)
	a.latest.Store(st)
}

func readLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func (a *api) status(w *percore.ResponseWriter, r *percore.Request) {
	w.Header("Content-Type", "application/json")
	w.Write(a.latest.Load().body)
}

// sum decodes a small body on the shard: CPU work, bounded by --max-body.
func sum(w *percore.ResponseWriter, r *percore.Request) {
	w.Header("Content-Type", "application/json")
	var in struct {
		Numbers []float64 `json:"numbers"`
	}
	if err := json.Unmarshal(r.Body, &in); err != nil {
		w.WriteHeader(400)
		out, _ := json.Marshal(map[string]string{"error": err.Error()})
		w.Write(out)
		return
	}
	var total float64
	for _, n := range in.Numbers {
		total += n
	}
	out, _ := json.Marshal(map[string]float64{"sum": total})
	w.Write(out)
}

func newServer(a *api) *percore.Server {
	s := percore.New()
	s.HandleMethod("GET", "/api/status", a.status)
	s.HandleMethod("POST", "/api/sum", sum)
	return s
}

func main() {
	a := &api{}
	a.publish(readLoad()) // a snapshot exists before the first request
	stop := make(chan struct{})
	go a.refresh(time.Second, stop)
	code := newServer(a).Main("json")
	close(stop)
	os.Exit(code)
}
