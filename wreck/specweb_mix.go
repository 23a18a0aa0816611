package wreck

// The SPECweb99 workload's choices: what a simulated user asks for next,
// drawn from a seeded generator. The shares are SPEC's published SPECweb99
// description (the request, class, directory and file mixes).

import (
	"math/rand/v2"
	"slices"

	"percore/specweb/fileset"
)

// WorkloadSpecweb99 names the SPECweb99 workload (Config.Workload).
const WorkloadSpecweb99 = "specweb99"

// swKind is a kind of SPECweb99 request.
type swKind uint8

const (
	kStatic  swKind = iota // GET of a file
	kDynamic               // standard dynamic GET
	kAd                    // dynamic GET with custom ad rotation
	kPost                  // dynamic POST
	kCGI                   // CGI-style dynamic GET
	numKinds
)

var kindNames = [numKinds]string{"static", "dynamic", "ad", "post", "cgi"}

// kindShare is the request mix.
var kindShare = [numKinds]float64{0.70, 0.1245, 0.126, 0.048, 0.0015}

// staticShare is the static-only mix (Config.StaticOnly): the static GETs
// alone, for servers without SPECweb99's dynamic modules.
var staticShare = [numKinds]float64{1, 0, 0, 0, 0}

// kindShares is the request mix a run draws from.
func kindShares(staticOnly bool) *[numKinds]float64 {
	if staticOnly {
		return &staticShare
	}
	return &kindShare
}

// classShare is the class mix of the files asked for.
var classShare = [fileset.Classes]float64{0.35, 0.50, 0.14, 0.01}

// fileByRank maps a file's Zipf rank within its class to its number.
var fileByRank = [fileset.FilesPerDir]int{4, 3, 5, 2, 6, 1, 7, 8, 0}

const (
	userRate     = 400_000 // bit/s each simulated user is paced to
	conformRate  = 320_000 // bit/s a user must exceed to conform
	keepAliveRun = 10      // requests on a keep-alive connection
	// keepAliveShare of new connections are keep-alive, so that
	// keepAliveShare*10 / (keepAliveShare*10 + 1-keepAliveShare) = 70% of
	// requests travel on keep-alive connections.
	keepAliveShare = 0.7 / 3.7
)

// swReq is one drawn request.
type swReq struct {
	kind            swKind
	dir, class, num int
}

// swMix draws requests: the kind by the request mix, the class by the class
// mix, the directory by Zipf (alpha 1) over the directories and the file by
// Zipf over the 9 ranks. It never allocates after newMix.
type swMix struct {
	rng     *rand.Rand
	dirCDF  []float64 // cumulative Zipf weights of directories 0..dirs-1, normalised
	fileCDF [fileset.FilesPerDir]float64
	kindCDF [numKinds]float64
	clsCDF  [fileset.Classes]float64
}

func newMix(seed, stream uint64, dirs int, kinds *[numKinds]float64) *swMix {
	m := &swMix{rng: rand.New(rand.NewPCG(seed, stream)), dirCDF: zipfCDF(make([]float64, dirs))}
	zipfCDF(m.fileCDF[:])
	cumulate(m.kindCDF[:], kinds[:])
	cumulate(m.clsCDF[:], classShare[:])
	return m
}

// zipfCDF fills cdf with the cumulative Zipf (alpha 1) weights of ranks
// 1..len(cdf), normalised to end at 1.
func zipfCDF(cdf []float64) []float64 {
	sum := 0.0
	for i := range cdf {
		sum += 1 / float64(i+1)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return cdf
}

func cumulate(cdf, share []float64) {
	sum := 0.0
	for i, s := range share {
		sum += s
		cdf[i] = sum
	}
	cdf[len(cdf)-1] = 1 // the shares add up to 1 but for rounding
}

// pick returns the index a uniform draw falls on in cdf.
func (m *swMix) pick(cdf []float64) int {
	i, _ := slices.BinarySearch(cdf, m.rng.Float64())
	return min(i, len(cdf)-1)
}

// draw returns the next request.
func (m *swMix) draw() swReq {
	return swReq{
		kind:  swKind(m.pick(m.kindCDF[:])),
		class: m.pick(m.clsCDF[:]),
		dir:   m.pick(m.dirCDF),
		num:   fileByRank[m.pick(m.fileCDF[:])],
	}
}

// keepAlive draws whether a new connection is a keep-alive one.
func (m *swMix) keepAlive() bool { return m.rng.Float64() < keepAliveShare }

// pacedAt is when a user that began at t0 and has read bytes so far may
// send its next request: when a 400,000 bit/s line would have carried them.
func pacedAt(t0, bytes int64) int64 {
	return t0 + bytes*(8*1e9/userRate) // 20 µs a byte
}
