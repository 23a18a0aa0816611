// Package specweb is the SPECweb99 workload's server side on percore: the
// file set and its generator, the User.Personality and Custom.Ads tables with
// the ad selection, and the handlers a SPECweb99 client talks to. It
// implements the workload from SPEC's published SPECweb99 description; it is
// not the licensed benchmark kit.
//
// # The file set
//
// A run for C connections uses Dirs(C) directories, file_set/dir00000 up,
// each with 4 classes of 9 files (FileSize). Every file starts with one header
// line ("SPECweb99 file_set/dir00012/class1_3 4096") that a client checks,
// followed by deterministic filler (AppendFile). Class 1 and 2 files carry
// CAD tags for the ad rotation: file Y holds Y+1 of them, spread evenly.
// Generate writes the set (and User.Personality and Custom.Ads) resumably.
// The set's shape and contents live in package specweb/fileset, which a
// client imports to check answers without linking the server.
//
// # URLs (as SPECweb99 clients send them)
//
//	GET  /file_set/dirNNNNN/classC_Y                    static, from the docroot
//	GET  /specweb99-fcgi.pl?/file_set/dirNNNNN/classC_Y  standard dynamic GET
//	GET  same, with Cookie: my_cookie=user_id=U&last_ad=N  ad rotation
//	POST /specweb99-fcgi.pl  urlroot=/file_set/&dir=NNNNN&class=C&num=Y&client=K
//	GET  /specweb99-fcgi.pl?command/Reset[&maxload=N]    housekeeping
//	GET  /specweb99-fcgi.pl?command/Fetch                the post log
//	GET  /specweb99-cgi.pl?/file_set/dirNNNNN/classC_Y   CGI: a separate program per request
//
// Commands are obeyed only from the client addresses in Config.CommandFrom
// (loopback by default); others get 403.
//
// # Ads
//
// Ad n (0..359) is the file AdPath(n): directory n/36, class (n%36)/9, file
// n%9, so the 360 ads are the first 10 directories, which every file set has.
// An ad's expiry is seconds after the tables were loaded or reset, so the
// tables are a pure function of the seed.
//
// # Handlers and memory
//
// Handlers run on percore's shards and never block. The file set is held
// once: the static GETs and the dynamic handlers read it through percore's
// per-shard file cache (ResponseWriter.File), bounded by --cache-size, so a
// set larger than memory is served. On a miss the handler returns, a file
// reader off the shard reads the file, and the handler runs again. Load
// reads no file but the first and last directory's headers; the CAD tags'
// offsets are the generator's, the same in every directory, and are checked
// against each file as it is rewritten.
//
// # The post log
//
// Every shard may post at once. PostLog gives each record a sequence number
// from one atomic counter and writes it into its own fixed slot; a record is
// published by a per-slot flag once whole. Readers take the prefix of
// published records, so the log is one order (the sequence), no record is torn
// or lost, and no shard ever waits for another. Fetch returns it, Reset
// starts a new one, and Persist copies it to a file from a goroutine of its
// own.
package specweb
