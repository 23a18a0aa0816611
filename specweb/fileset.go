package specweb

import "percore/specweb/fileset"

// The file set is package fileset's (the client checks responses against it
// without linking the server); these names keep specweb's API whole.
const (
	Classes     = fileset.Classes
	FilesPerDir = fileset.FilesPerDir
	NumAds      = fileset.NumAds

	filesPerDirT = fileset.FilesPerDirAll
	tagOpen      = fileset.TagOpen
	tagClose     = fileset.TagClose
	pathLen      = fileset.PathLen
)

// Dirs is the number of directories a run for conns connections uses.
func Dirs(conns int) int { return fileset.Dirs(conns) }

// FileSize is the size in bytes of file num (0..8) of class (0..3).
func FileSize(class, num int) int { return fileset.FileSize(class, num) }

// DirBytes is the size of one directory's 36 files.
func DirBytes() int64 { return fileset.DirBytes() }

// FilePath is a file's path below the file set root, "file_set/dir00012/class1_3".
func FilePath(dir, class, num int) string { return fileset.FilePath(dir, class, num) }

// Tags is how many CAD tags file num of class holds.
func Tags(class, num int) int { return fileset.Tags(class, num) }

// AppendFile appends the contents of a file (see package fileset).
func AppendFile(b []byte, dir, class, num int) []byte { return fileset.AppendFile(b, dir, class, num) }

// AdPath is the file ad n stands for.
func AdPath(n int) string { return fileset.AdPath(n) }

func header(b []byte, dir, class, num int) []byte { return fileset.Header(b, dir, class, num) }
func appendPath(b []byte, dir, class, num int) []byte {
	return fileset.AppendPath(b, dir, class, num)
}
func appendPadded(b []byte, n, width int) []byte { return fileset.AppendPadded(b, n, width) }
