package bucket

// Hashes and phases (hash.go): pinned, unambiguous, before 1970.

import "testing"

// pinnedHash is Hash("limit", "key"), pinned: fixed windows' phases are
// part of the on-disk contract.
const pinnedHash uint64 = 0xe65880427c7d4559

func TestHashIsUnambiguous(t *testing.T) {
	if Hash("a\x00", "b") == Hash("a", "\x00b") || Hash("ab", "") == Hash("a", "b") || Hash("a", "b") == Hash("b", "a") {
		t.Fatal("hash confuses name/key boundaries")
	}
	// Pinned: the phase is part of the on-disk contract.
	if got := Hash("limit", "key"); got != pinnedHash {
		t.Fatalf("Hash changed: %#x (want %#x); this moves every fixed window", got, pinnedHash)
	}
}

func TestStartPhaseBefore1970(t *testing.T) {
	if got := StartPhase(-1, 10); got != 9 {
		t.Fatalf("StartPhase(-1, 10) = %d, want 9", got)
	}
}
