// Command httpd is percore's HTTP/1.1 server: one shard per core serving static
// files and the built-in hello route. See README.md for the flags.
package main

import (
	"os"

	"percore"
)

func main() { os.Exit(percore.New().Main("httpd")) }
