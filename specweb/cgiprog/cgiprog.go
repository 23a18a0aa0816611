// Package cgiprog is the SPECweb99 CGI program: the separate process that
// answers one CGI-style GET (RFC 3875: the request in the environment, the
// response on stdout), the same page as the standard dynamic GET. It imports
// no server code, so the program starts in about a millisecond, which a
// process per request needs.
package cgiprog

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"

	"percore/specweb/fileset"
)

// Serve answers the request in the CGI environment (getenv: os.Getenv),
// reading the file from DOCUMENT_ROOT, and writes the response to out. A
// query that names no file of the set gets Status 404.
func Serve(getenv func(string) string, out io.Writer) error {
	root, query := getenv("DOCUMENT_ROOT"), getenv("QUERY_STRING")
	var dir, class, num int
	_, err := fmt.Sscanf(query, "/file_set/dir%05d/class%d_%d", &dir, &class, &num)
	if err != nil || min(dir, class, num) < 0 || class >= fileset.Classes || num >= fileset.FilesPerDir ||
		"/"+fileset.FilePath(dir, class, num) != query {
		_, err := io.WriteString(out, "Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nspecweb cgi: want ?/file_set/dirNNNNN/classC_Y\n")
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, fileset.FilePath(dir, class, num)))
	if err != nil {
		return err
	}
	remote := getenv("REMOTE_ADDR")
	if a, err := netip.ParseAddr(remote); err == nil {
		remote = a.String()
	}
	b := make([]byte, 0, len(data)+512)
	b = append(b, "Content-Type: text/html\r\n\r\n"...)
	b = fileset.AppendPagePrefix(b, remote, getenv("SCRIPT_NAME"), query)
	b = append(b, data...)
	b = append(b, fileset.PageSuffix...)
	_, err = out.Write(b)
	return err
}
