//go:build !unix

package main

import "time"

// processCPU is not measured on this platform: the cpu/dec and cores
// columns show "-" and 0.
func processCPU() time.Duration { return 0 }
