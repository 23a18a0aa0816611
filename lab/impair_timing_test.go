package lab

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkImpairer is the engine's cost per frame: Push, Due and Done with
// every impairment on.
func BenchmarkImpairer(b *testing.B) {
	im := NewImpairer(ImpairSpec{Loss: 0.05, Reorder: 0.1, Duplicate: 0.01, Corrupt: 0.001, Delay: time.Microsecond, Seed: 1}, 0, 4096, 2048)
	f := testFrame(1)
	out := make([][]byte, 32)
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	now := time.Duration(0)
	for range b.N {
		now += 100 * time.Nanosecond
		if s, buf, ok := im.Alloc(); ok {
			im.Push(now, s, copy(buf, f))
		}
		k := im.Due(now, out)
		im.Done(k, k)
	}
}

// BenchmarkImpairedTCP is kernel TCP throughput from server to client through
// the bridge, without impairment and with the spec.
func BenchmarkImpairedTCP(b *testing.B) {
	for _, spec := range []string{"loss=0%", "loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=1"} {
		b.Run(spec, func(b *testing.B) {
			sp, err := ParseImpair(spec)
			if err != nil {
				b.Fatal(err)
			}
			im, ln := newImpairedTCP(b, sp)
			const chunk = 1 << 20
			data := make([]byte, chunk)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				for range b.N {
					if _, err := c.Write(data); err != nil {
						return
					}
				}
			}()
			var c net.Conn
			if err := im.ClientNS.Do(func() (err error) {
				c, err = net.Dial("tcp4", ln.Addr().String())
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Minute))
			b.SetBytes(chunk)
			b.ResetTimer()
			if n, err := io.CopyN(io.Discard, c, int64(b.N)*chunk); err != nil {
				b.Fatalf("after %d bytes: %v", n, err)
			}
			b.StopTimer()
			s1, s2 := im.Stats()
			b.ReportMetric(float64(s1.Forwarded+s2.Forwarded)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
