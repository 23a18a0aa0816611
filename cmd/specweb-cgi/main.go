// Command specweb-cgi is the SPECweb99 CGI program that specweb serve runs
// once per CGI-style GET: the request in the CGI environment, the response
// on stdout. It is small so that it starts fast; "specweb cgi" does the same
// from the larger specweb program.
package main

import (
	"fmt"
	"os"

	"percore/specweb/cgiprog"
)

func main() {
	if err := cgiprog.Serve(os.Getenv, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "specweb-cgi: %v\n", err)
		os.Exit(1)
	}
}
