package redislimit

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"
)

// libraryTemplate is the store's Redis function library (script.lua),
// with LIBRARY where its name goes.
//
//go:embed script.lua
var libraryTemplate string

// libraryName names the library, and its one function, after the SHA-1 of
// its source: processes running different versions of this package on
// one server call each their own.
var libraryName = func() string {
	h := sha1.Sum([]byte(libraryTemplate))
	return "ratelimit_" + hex.EncodeToString(h[:8])
}()

// librarySource is the library as FUNCTION LOAD takes it.
var librarySource = strings.ReplaceAll(libraryTemplate, "LIBRARY", libraryName)
