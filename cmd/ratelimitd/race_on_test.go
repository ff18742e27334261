//go:build race

package main

// raceEnabled builds the binary the end-to-end tests run with the race
// detector too, and shrinks their load.
const raceEnabled = true
