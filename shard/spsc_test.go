package shard

import (
	"fmt"
	"runtime"
	"testing"
)

func TestQueueOrderAndBounds(t *testing.T) {
	q := NewQueue[int](3) // rounds up to 4
	for i := 0; i < 4; i++ {
		if !q.Push(i) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.Push(9) {
		t.Fatalf("push into a full queue succeeded")
	}
	for i := 0; i < 4; i++ {
		if v, ok := q.Pop(); !ok || v != i {
			t.Fatalf("pop = %d %v, want %d", v, ok, i)
		}
	}
	if _, ok := q.Pop(); ok {
		t.Fatalf("pop from an empty queue succeeded")
	}
}

// TestQueueConcurrent moves a bounded count of items between two goroutines and
// checks none is lost, duplicated or reordered (run with -race to check the
// publication order too).
func TestQueueConcurrent(t *testing.T) {
	q := NewQueue[int](8)
	const n = 100000
	done := make(chan error, 1)
	go func() {
		want := 0
		for want < n {
			if v, ok := q.Pop(); ok {
				if v != want {
					done <- fmt.Errorf("got %d, want %d", v, want)
					return
				}
				want++
			} else {
				runtime.Gosched()
			}
		}
		done <- nil
	}()
	for i := 0; i < n; {
		if q.Push(i) {
			i++
		} else {
			runtime.Gosched()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
