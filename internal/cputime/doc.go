// Package cputime reads the CPU time this process has used, for the
// benchmark harness (bench) and benchmarks that report CPU per operation.
package cputime
