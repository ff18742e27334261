package cputime

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Of is the user and system CPU time process pid has used, read from
// /proc/PID/stat; 0 if pid is 0 or the file cannot be read (a process
// that has exited, a system without /proc).
func Of(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return parseStat(string(b))
}

// parseStat reads utime + stime (fields 14 and 15, in clock ticks, taken
// as 100 a second) of a /proc/PID/stat line; the command name, field 2,
// may hold blanks and parentheses, so fields are counted after its last
// ')'. A line it cannot read is 0.
func parseStat(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * (time.Second / 100)
}
