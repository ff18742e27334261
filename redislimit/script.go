package redislimit

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// scriptSource is the store's one script (script.lua); scriptSHA its
// SHA-1, the name EVALSHA calls it by.
//
//go:embed script.lua
var scriptSource string

var scriptSHA = func() string {
	h := sha1.Sum([]byte(scriptSource))
	return hex.EncodeToString(h[:])
}()
