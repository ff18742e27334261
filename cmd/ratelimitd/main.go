package main

import (
	"fmt"
	"io"
	"os"
)

// usage is the -h text of ratelimitd without a command.
const usage = `ratelimitd: a rate limit service, a drop-in for envoyproxy/ratelimit
(Envoy's gRPC rate limit protocol, its YAML configuration), deciding each
request all or nothing and keeping every grant on disk before answering.

Usage:
  ratelimitd serve -config FILE|DIR [-data FILE | -redis ADDR] [flags]   serve (serve -h lists the flags)
  ratelimitd inspect FILE     summarise a limiter's file: format, snapshot, log, buckets per limit
  ratelimitd verify FILE      check a limiter's file; exit 0 sound, 1 damaged, 2 not checked
  ratelimitd dump FILE        print the stored buckets as JSON lines
  ratelimitd salvage FILE NEW read what can be read of a damaged file into a new one; exit 1 if anything was lost
  ratelimitd version          print the version

The file tools refuse a file a serving ratelimitd has open: back it up
through the admin port (GET /v1/backup) and inspect the copy.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the command in args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(rest, stderr)
	case "inspect", "verify", "dump", "salvage":
		return fileTool(cmd, rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "ratelimitd", version())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ratelimitd: unknown command %q\n\n%s", cmd, usage)
	return 2
}
