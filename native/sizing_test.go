package native

import "testing"

func TestSizeFor(t *testing.T) {
	for _, tc := range []struct {
		conns, frames int
		want          Sizing
	}{
		{64, 0, Sizing{Conns: 64, Frames: 4096, Ring: 2048, SynBacklog: 128, Memory: 32 << 20}},
		{1024, 0, Sizing{Conns: 1024, Frames: 4096, Ring: 2048, SynBacklog: 512, Memory: 32 << 20}},
		{8192, 0, Sizing{Conns: 8192, Frames: 16384, Ring: 8192, SynBacklog: 4096, Memory: 128 << 20}},
		{10000, 0, Sizing{Conns: 10000, Frames: 32768, Ring: 16384, SynBacklog: 5000, Memory: 10000 * 16 << 10}},
		{16384, 0, Sizing{Conns: 16384, Frames: 32768, Ring: 16384, SynBacklog: 8192, Memory: 256 << 20}},
		{65536, 0, Sizing{Conns: 65536, Frames: 65536, Ring: 32768, SynBacklog: 32768, Memory: 512 << 20}},
		{1 << 20, 0, Sizing{Conns: 1 << 20, Frames: 65536, Ring: 32768, SynBacklog: 32768, Memory: 512 << 20}},
		{16384, 4096, Sizing{Conns: 16384, Frames: 4096, Ring: 2048, SynBacklog: 8192, Memory: 256 << 20}}, // --xdp-frames overrides
		{1, 64, Sizing{Conns: 1, Frames: 64, Ring: 32, SynBacklog: 128, Memory: 32 << 20}},
	} {
		if got := SizeFor(tc.conns, tc.frames); got != tc.want {
			t.Errorf("SizeFor(%d, %d) = %+v, want %+v", tc.conns, tc.frames, got, tc.want)
		}
	}
	if got := SizeFor(16384, 0).UMEMBytes(4096); got != 128<<20 {
		t.Errorf("UMEM of 32768 4 KiB frames = %d bytes, want 128 MiB", got)
	}
}

func TestFrameSize(t *testing.T) {
	for _, tc := range []struct{ mtu, want int }{{576, 2048}, {1500, 2048}, {1778, 2048}, {1779, 4096}, {3000, 4096}} {
		if got := frameSize(tc.mtu); got != tc.want {
			t.Errorf("frameSize(%d) = %d, want %d", tc.mtu, got, tc.want)
		}
	}
}
