package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/filetool"
)

// fileTool runs inspect, verify, dump or salvage. Exit codes: 0 done
// (and, for verify, sound), 1 the file is damaged (problems found), 2
// the command could not run.
func fileTool(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	want, what := 1, "FILE"
	if cmd == "salvage" {
		want, what = 2, "FILE NEW"
	}
	fs.Usage = func() { fmt.Fprintf(stderr, "usage: ratelimitd %s %s\n", cmd, what) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != want {
		fs.Usage()
		return 2
	}
	path := fs.Arg(0)
	fail := func(err error) int {
		fmt.Fprintf(stderr, "ratelimitd %s: %v\n", cmd, err)
		return 2
	}
	switch cmd {
	case "inspect":
		c, err := filetool.Inspect(stdout, path, time.Now())
		if err != nil {
			return fail(err)
		}
		if len(c.Problems) > 0 {
			return 1
		}
	case "verify":
		if err := filetool.Verify(stdout, path); err != nil {
			if errors.Is(err, filetool.ErrDamaged) {
				fmt.Fprintf(stderr, "ratelimitd verify: %v\n", err)
				return 1
			}
			return fail(err)
		}
	case "dump":
		c, err := filetool.Dump(stdout, path)
		if err != nil {
			return fail(err)
		}
		for _, p := range c.Problems {
			fmt.Fprintf(stderr, "ratelimitd dump: %s: %v\n", path, p)
		}
		if len(c.Problems) > 0 {
			return 1
		}
	case "salvage":
		rep, err := filetool.Salvage(stdout, path, fs.Arg(1))
		if err != nil {
			return fail(err)
		}
		if len(rep.Problems) > 0 { // damaged: the new file holds what was left
			return 1
		}
	}
	return 0
}
