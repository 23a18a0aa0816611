package specweb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"percore"
	"percore/specweb/fileset"
)

// The scripts' paths, as SPECweb99 clients name them.
const (
	DynamicPath = fileset.DynamicPath
	CGIPath     = fileset.CGIPath
)

// MaxPostBody is the largest POST body accepted; larger gets 413.
const MaxPostBody = 256

// ErrNoFileSet means the directory holds no file set (Generate makes one).
var ErrNoFileSet = errors.New("no file set")

// Config are the application's settings.
type Config struct {
	Seed        uint64       // Reset draws the tables from it
	CommandFrom []netip.Addr // client addresses allowed ?command/...; nil: loopback
	CGI         []string     // the program (and its arguments) each CGI-style GET runs (package cgiprog); nil: 501
}

// App is the SPECweb99 application: the tables, the post log and where the
// CAD tags of each kind of file lie. The files themselves are read through
// percore's per-shard file cache (ResponseWriter.File), the one the static
// GETs are served from, so the set is held once and may be larger than
// memory. Its handlers may run on every shard at once.
type App struct {
	cfg   Config
	root  string                       // the file set's directory
	tags  [Classes * FilesPerDir][]int // per class and file: offsets of each tag's path, the same in every directory
	dirs  int
	state atomic.Pointer[state]
}

// state is what Reset replaces as a whole: the tables, when they were
// loaded (ads expire relative to it), and the post log.
type state struct {
	t      *Tables
	loaded time.Time
	log    *PostLog
}

// Load opens the file set under root: it counts its directories, checks the
// first and last directory's files (sizes and header lines; the others are
// read as they are asked for), and reads User.Personality and Custom.Ads.
// It blocks; call it before serving.
func Load(root string, cfg Config) (*App, error) {
	if cfg.CommandFrom == nil {
		cfg.CommandFrom = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	}
	a := &App{cfg: cfg, root: root}
	ents, err := os.ReadDir(filepath.Join(root, "file_set"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", root, ErrNoFileSet)
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() == filepath.Base(filepath.Dir(FilePath(a.dirs, 0, 0))) {
			a.dirs++
		}
	}
	if a.dirs < NumAds/filesPerDirT {
		return nil, fmt.Errorf("%s: %w (%d directories, at least %d needed)", root, ErrNoFileSet, a.dirs, NumAds/filesPerDirT)
	}
	for _, d := range []int{0, a.dirs - 1} {
		for c := range Classes {
			for y := range FilesPerDir {
				if err := checkFile(root, d, c, y); err != nil {
					return nil, err
				}
			}
		}
	}
	for c := range Classes {
		for y := range FilesPerDir {
			a.tags[c*FilesPerDir+y] = findTags(AppendFile(nil, 0, c, y))
		}
	}
	pers, err1 := os.ReadFile(filepath.Join(root, PersonalityFile))
	ads, err2 := os.ReadFile(filepath.Join(root, AdsFile))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("incomplete file set: %w", err)
	}
	t, err := ParseTables(pers, ads)
	if err != nil {
		return nil, err
	}
	a.state.Store(&state{t: t, loaded: time.Now(), log: new(PostLog)})
	return a, nil
}

// checkFile checks one file's size and header line.
func checkFile(root string, dir, class, num int) error {
	f, err := os.Open(filepath.Join(root, FilePath(dir, class, num)))
	if err != nil {
		return fmt.Errorf("incomplete file set: %w", err)
	}
	defer f.Close()
	want := header(nil, dir, class, num)
	got := make([]byte, len(want))
	fi, err := f.Stat()
	if err == nil {
		_, err = io.ReadFull(f, got)
	}
	if err != nil || fi.Size() != int64(FileSize(class, num)) || !bytes.Equal(got, want) {
		return fmt.Errorf("incomplete file set: %s is not what the generator writes", FilePath(dir, class, num))
	}
	return nil
}

// Dirs is the number of directories loaded.
func (a *App) Dirs() int { return a.dirs }

// findTags returns the offsets of the paths of the well-formed CAD tags in f.
func findTags(f []byte) []int {
	var at []int
	for i := 0; ; {
		k := bytes.Index(f[i:], []byte(tagOpen))
		if k < 0 {
			return at
		}
		p := i + k + len(tagOpen)
		if p+pathLen+len(tagClose) <= len(f) && string(f[p+pathLen:p+pathLen+len(tagClose)]) == tagClose {
			at = append(at, p)
		}
		i = p
	}
}

// Register puts the application's routes on s.
func (a *App) Register(s *percore.Server) {
	s.HandleMethod("GET", DynamicPath, a.get)
	s.HandleMethod("POST", DynamicPath, a.post)
	s.Handle(CGIPath, a.cgi)
}

// file parses "/file_set/dirNNNNN/classC_Y" and returns the file's class
// and number.
func (a *App) file(p []byte) (class, num int, ok bool) {
	rest, ok := bytes.CutPrefix(p, []byte("/file_set/dir"))
	if !ok || len(rest) != len("00000/class0_0") || string(rest[5:11]) != "/class" || rest[12] != '_' {
		return 0, 0, false
	}
	dir := 0
	for _, b := range rest[:5] {
		if b < '0' || b > '9' {
			return 0, 0, false
		}
		dir = dir*10 + int(b-'0')
	}
	class, num = int(rest[11])-'0', int(rest[13])-'0'
	if dir >= a.dirs || class < 0 || class >= Classes || num < 0 || num >= FilesPerDir {
		return 0, 0, false
	}
	return class, num, true
}

// get serves the dynamic GETs: a command, a standard dynamic GET, or with a
// Cookie field the ad rotation. The file comes from the shard's file cache;
// on a miss the handler returns and runs again once it has been read.
func (a *App) get(w *percore.ResponseWriter, r *percore.Request) {
	if cmd, ok := bytes.CutPrefix(r.Query, []byte("command/")); ok {
		a.command(w, r, cmd)
		return
	}
	class, num, ok := a.file(r.Query)
	if !ok {
		fail(w, 404, "specweb: want ?/file_set/dirNNNNN/classC_Y of a file in the set")
		return
	}
	cookie := r.Header("cookie")
	var user, lastAd int
	if cookie != nil {
		var err error
		if user, lastAd, err = ParseCookie(cookie); err != nil {
			fail(w, 400, "specweb: "+err.Error())
			return
		}
	}
	data, found, wait := w.File(r.Query)
	if wait {
		return
	}
	if !found || len(data) != FileSize(class, num) {
		fail(w, 404, "specweb: the file set has no file "+string(r.Query)+" of the generator's size")
		return
	}
	if cookie == nil {
		w.Header("Content-Type", "text/html")
		pagePrefix(w, r)
		w.Write(data)
		w.WriteString(pageSuffix)
		return
	}
	st := a.state.Load()
	u := user - FirstUser
	if u < 0 || u >= len(st.t.Users) {
		fail(w, 400, "specweb: unknown user_id "+strconv.Itoa(user))
		return
	}
	ad, weight := st.t.Select(st.t.Users[u], lastAd)
	expired := time.Since(st.loaded) > time.Duration(st.t.Ads[ad].Expiry)*time.Second
	var c [64]byte
	w.HeaderBytes("Set-Cookie", AppendFoundCookie(c[:0], ad, weight, expired))
	w.Header("Content-Type", "text/html")
	pagePrefix(w, r)
	writeRewritten(w, data, a.tags[class*FilesPerDir+num], AdPath(ad))
	w.WriteString(pageSuffix)
}

// writer is where a rewritten file goes: the ResponseWriter, a buffer in tests.
type writer interface {
	Write([]byte) (int, error)
	WriteString(string) (int, error)
}

// writeRewritten writes data with every CAD tag pointing at path. tags are
// where the generator puts them; a file changed since (every tag checked)
// has its tags found again.
func writeRewritten(w writer, data []byte, tags []int, path string) {
	for _, p := range tags {
		if p < len(tagOpen) || p+pathLen+len(tagClose) > len(data) ||
			string(data[p-len(tagOpen):p]) != tagOpen || string(data[p+pathLen:p+pathLen+len(tagClose)]) != tagClose {
			tags = findTags(data)
			break
		}
	}
	from := 0
	for _, p := range tags {
		w.Write(data[from:p])
		w.WriteString(path)
		from = p + pathLen
	}
	w.Write(data[from:])
}

// pagePrefix is the small page the dynamic responses wrap their content in.
func pagePrefix(w *percore.ResponseWriter, r *percore.Request) {
	var b [64]byte
	w.WriteString(fileset.PageHead)
	w.Write(r.Remote.Addr().Unmap().AppendTo(b[:0]))
	w.WriteString(fileset.PageScript)
	w.Write(r.Path)
	w.WriteString(fileset.PageQuery)
	w.Write(r.Query)
	w.WriteString(fileset.PageBodyStart)
}

const pageSuffix = fileset.PageSuffix

// post logs one dynamic POST: body "urlroot=...&dir=NNNNN&class=C&num=Y&client=K"
// and the user from my_cookie.
func (a *App) post(w *percore.ResponseWriter, r *percore.Request) {
	if len(r.Body) > MaxPostBody {
		fail(w, 413, "specweb: POST body over "+strconv.Itoa(MaxPostBody)+" bytes")
		return
	}
	p, ok := parsePostBody(r.Body)
	if !ok {
		fail(w, 400, "specweb: want a POST body urlroot=/file_set/&dir=NNNNN&class=C&num=Y&client=K")
		return
	}
	user, _, err := ParseCookie(r.Header("cookie"))
	if err != nil {
		fail(w, 400, "specweb: "+err.Error())
		return
	}
	st := a.state.Load()
	if u := user - FirstUser; u < 0 || u >= len(st.t.Users) {
		fail(w, 400, "specweb: unknown user_id "+strconv.Itoa(user))
		return
	}
	if p.Dir >= a.dirs {
		fail(w, 404, "specweb: no directory "+strconv.Itoa(p.Dir)+" in the file set")
		return
	}
	p.User, p.Conn, p.Time = user, int(r.Remote.Port()), time.Now().Unix()
	seq, ok := st.log.Append(&p)
	if !ok {
		fail(w, 503, "specweb: the post log is full; ?command/Reset clears it")
		return
	}
	var b [20]byte
	w.Header("Content-Type", "text/html")
	pagePrefix(w, r)
	w.WriteString(fileset.PostAnswer)
	w.Write(strconv.AppendUint(b[:0], seq, 10))
	w.WriteString("\n")
	w.WriteString(pageSuffix)
}

// parsePostBody reads the POST body's fields in any order; urlroot is
// optional, the others are required once each.
func parsePostBody(b []byte) (p Post, ok bool) {
	var seen [4]bool
	for len(b) > 0 {
		kv := b
		if i := bytes.IndexByte(b, '&'); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, found := bytes.Cut(kv, []byte("="))
		if !found {
			return p, false
		}
		var slot, limit int
		var dst *int
		switch string(k) {
		case "urlroot":
			continue
		case "dir":
			slot, dst, limit = 0, &p.Dir, 99999
		case "class":
			slot, dst, limit = 1, &p.Class, Classes-1
		case "num":
			slot, dst, limit = 2, &p.Num, FilesPerDir-1
		case "client":
			slot, dst, limit = 3, &p.Client, 999999999
		default:
			return p, false
		}
		n, rest, ok := field(v, "", 0)
		if !ok || len(rest) != 0 || n > limit || seen[slot] {
			return p, false
		}
		seen[slot], *dst = true, n
	}
	return p, seen == [4]bool{true, true, true, true}
}

// command obeys ?command/Reset[&maxload=N] and ?command/Fetch from the
// configured client addresses.
func (a *App) command(w *percore.ResponseWriter, r *percore.Request, cmd []byte) {
	if !slices.Contains(a.cfg.CommandFrom, r.Remote.Addr().Unmap()) {
		fail(w, 403, "specweb: commands are taken only from the configured client addresses")
		return
	}
	name, args, _ := bytes.Cut(cmd, []byte("&"))
	switch string(name) {
	case "Fetch":
		w.Header("Content-Type", "text/plain")
		w.Write(a.state.Load().log.AppendTo(nil))
	case "Reset":
		users := len(a.state.Load().t.Users)
		for len(args) > 0 {
			var kv []byte
			kv, args, _ = bytes.Cut(args, []byte("&"))
			if v, ok := bytes.CutPrefix(kv, []byte("maxload=")); ok {
				n, rest, ok := field(v, "", 0)
				if !ok || len(rest) != 0 || n < 1 || n > MaxUsers {
					fail(w, 400, "specweb: maxload wants 1 to "+strconv.Itoa(MaxUsers)+" users")
					return
				}
				users = n
			}
		}
		a.Reset(users)
		w.Header("Content-Type", "text/plain")
		w.WriteString("specweb: reset: " + strconv.Itoa(users) + " users, " + strconv.Itoa(NumAds) + " ads, post log cleared\n")
	default:
		fail(w, 400, "specweb: unknown command; want command/Reset or command/Fetch")
	}
}

// Reset draws new tables for users users from the configured seed and
// starts an empty post log. It is CPU work only (no I/O), bounded by
// MaxUsers, so it runs on the shard that received the command.
func (a *App) Reset(users int) {
	a.state.Store(&state{t: NewTables(a.cfg.Seed, users), loaded: time.Now(), log: new(PostLog)})
}

// Log is the current post log.
func (a *App) Log() *PostLog { return a.state.Load().log }

func fail(w *percore.ResponseWriter, code int, msg string) {
	w.WriteHeader(code)
	w.Header("Content-Type", "text/plain")
	w.WriteString(msg + "\n")
}
