package httpd

// The file cache of one shard, bounded in bytes, with S3-FIFO eviction
// (Yang et al., "FIFO queues are all you need for cache eviction", SOSP
// 2023). S3-FIFO suits a Zipf workload: a small FIFO takes every new file
// and lets the one-hit wonders of the long tail leave quickly, a main FIFO
// keeps the files asked for again, and a ghost FIFO of recently evicted keys
// admits a returning file straight into main. A hit only bumps a two-bit
// counter: no list is touched, so the hit path stays as cheap as the map
// lookup it was before the cache was bounded. (CLOCK-Pro and W-TinyLFU reach
// similar hit ratios on Zipf traces at the cost of more state per hit.)
//
// The cache is per shard, like everything on the data path: a file hot on
// every shard is held once per shard. Entries are never written after they
// are made, so a response queued from an entry stays valid after the entry
// is evicted (the garbage collector keeps its bytes while a slice points at
// them).

// entryKind is what a path resolved to.
type entryKind uint8

const (
	entMissing  entryKind = iota // nothing servable: 404 (or the built-in hello at "/")
	entFile                      // a regular file
	entRedirect                  // a directory with an index.html, named without its slash: 301
)

// cacheEntry is one resolved path. Made by a file job, owned by the shard's
// cache once added.
type cacheEntry struct {
	key    string
	kind   entryKind
	file   *staticFile // entFile
	cost   int64
	freq   uint8 // hits since insertion or the last pass through main, at most 3
	inMain bool
	gone   bool // removed; its queue slot is skipped
	whole  bool // made for a handler that wants the whole file (ResponseWriter.File)
}

// entryOverhead is what an entry costs beyond its bytes: the structs, the map
// slot, the key's header. A rough figure keeps missing-file entries bounded too.
const entryOverhead = 256

func newEntry(key string, kind entryKind, f *staticFile) *cacheEntry {
	e := &cacheEntry{key: key, kind: kind, file: f, cost: int64(len(key)) + entryOverhead}
	if f != nil {
		e.cost += int64(len(f.full) + len(f.nm) + len(f.rel))
	}
	return e
}

// fifo is a queue of entries: push at the back, pop at the front.
type fifo struct {
	q []*cacheEntry
	h int
}

func (f *fifo) push(e *cacheEntry) {
	if f.h > 0 && f.h >= len(f.q)/2 {
		n := copy(f.q, f.q[f.h:])
		clear(f.q[n:])
		f.q, f.h = f.q[:n], 0
	}
	f.q = append(f.q, e)
}

func (f *fifo) pop() *cacheEntry {
	for f.h < len(f.q) {
		e := f.q[f.h]
		f.q[f.h] = nil
		f.h++
		if !e.gone {
			return e
		}
	}
	return nil
}

type fileCache struct {
	max, maxSmall int64 // bytes in all, in the small queue
	used, small   int64
	maxFile       int64 // larger files are streamed, not held
	m             map[string]*cacheEntry
	sq, mq        fifo
	ghost         map[string]struct{}
	gq            []string // ghost keys, oldest first
	gh            int
	stats         *Stats
}

func newFileCache(max int64, stats *Stats) *fileCache {
	return &fileCache{
		max:      max,
		maxSmall: max / 10, // S3-FIFO's small queue: 10% of the cache
		maxFile:  min(max/8, maxCachedFile),
		m:        make(map[string]*cacheEntry),
		ghost:    make(map[string]struct{}),
		stats:    stats,
	}
}

// maxCachedFile bounds a cached file: larger ones stream from disk, which
// costs little against their transfer time.
const maxCachedFile = 16 << 20

// get returns the entry for path, nil on a miss. It does not allocate.
func (fc *fileCache) get(path []byte) *cacheEntry {
	e := fc.m[string(path)]
	if e == nil {
		fc.stats.CacheMisses++
		return nil
	}
	fc.stats.CacheHits++
	if e.freq < 3 {
		e.freq++
	}
	return e
}

// add inserts e (replacing an entry of the same key), evicting as needed. An
// entry larger than the whole cache is not kept.
func (fc *fileCache) add(e *cacheEntry) {
	if old := fc.m[e.key]; old != nil {
		fc.remove(old)
	}
	if e.cost > fc.max {
		return
	}
	for fc.used+e.cost > fc.max && fc.evict() {
	}
	fc.m[e.key] = e
	fc.used += e.cost
	if _, ok := fc.ghost[e.key]; ok {
		delete(fc.ghost, e.key)
		e.inMain = true
		fc.mq.push(e)
		return
	}
	fc.small += e.cost
	fc.sq.push(e)
}

func (fc *fileCache) remove(e *cacheEntry) {
	e.gone = true
	delete(fc.m, e.key)
	fc.used -= e.cost
	if !e.inMain {
		fc.small -= e.cost
	}
}

// evict frees one entry's worth, or moves one to main: from the small queue
// while it holds more than its share (or main is empty), else from main. It
// reports false when the cache is empty.
func (fc *fileCache) evict() bool {
	if len(fc.m) == 0 {
		return false
	}
	if fc.small > fc.maxSmall || fc.used == fc.small {
		fc.evictSmall()
	} else {
		fc.evictMain()
	}
	return true
}

// evictSmall takes the oldest entry of the small queue: one asked for again
// since it came in moves to main, the others leave for the ghost queue.
func (fc *fileCache) evictSmall() {
	e := fc.sq.pop()
	if e == nil {
		fc.evictMain()
		return
	}
	if e.freq > 1 {
		fc.small -= e.cost
		e.inMain, e.freq = true, 0
		fc.mq.push(e)
		return
	}
	fc.remove(e)
	fc.stats.CacheEvictions++
	fc.addGhost(e.key)
}

// evictMain takes the oldest entry of main: one hit since its last pass goes
// round again with one hit less (CLOCK), the others leave.
func (fc *fileCache) evictMain() {
	for {
		e := fc.mq.pop()
		if e == nil {
			return
		}
		if e.freq > 0 {
			e.freq--
			fc.mq.push(e)
			continue
		}
		fc.remove(e)
		fc.stats.CacheEvictions++
		return
	}
}

// addGhost remembers an evicted key; the ghost queue holds about as many keys
// as the cache holds entries.
func (fc *fileCache) addGhost(key string) {
	fc.ghost[key] = struct{}{}
	fc.gq = append(fc.gq, key)
	for len(fc.gq)-fc.gh > max(len(fc.m), 64) {
		delete(fc.ghost, fc.gq[fc.gh])
		fc.gq[fc.gh] = ""
		fc.gh++
	}
	if fc.gh > 0 && fc.gh >= len(fc.gq)/2 {
		n := copy(fc.gq, fc.gq[fc.gh:])
		clear(fc.gq[n:])
		fc.gq, fc.gh = fc.gq[:n], 0
	}
}

// clear drops every entry and ghost (a reload).
func (fc *fileCache) clear() {
	*fc = *newFileCache(fc.max, fc.stats)
}
