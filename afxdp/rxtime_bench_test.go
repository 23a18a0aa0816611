package afxdp

import (
	"encoding/binary"
	"testing"
)

// BenchmarkRxCycle is the socket's receive path per frame, the kernel
// played by the test over plain memory: 64 frames on the rx ring (each
// with a receive stamp in front), Receive, then Release to the fill ring.
// "stamped" also reads (and clears) each frame's RxStamp, as AFXDPLink
// does.
func BenchmarkRxCycle(b *testing.B) {
	for _, stamped := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "stamped"}[stamped]
		b.Run(name, func(b *testing.B) {
			s := memSocket(b, 256)
			rx := make([]Desc, 64)
			in := make([]Desc, 64)
			for i := range in {
				in[i] = Desc{Addr: uint64(128+i)*2048 + rxHeadroom, Len: 64}
			}
			var last int64
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += 64 {
				for _, d := range in {
					binary.NativeEndian.PutUint64(s.umem[d.Addr-rxStampLen:], uint64(done+1))
				}
				kernelRx(s, in...)
				n := s.Receive(rx)
				if stamped {
					for _, d := range rx[:n] {
						last = s.RxStamp(d.Addr)
					}
				}
				s.Release(rx[:n])
				s.fill.consumer.Store(s.fill.producer.Load())
			}
			_ = last
		})
	}
}
