package server

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// fingerprint is a digest of what config.Load would read at path: the
// files' names, sizes, modification times and contents (hidden names
// skipped, symbolic links followed), and any error met on the way, so
// that any change to the configuration changes it.
type fingerprint [sha256.Size]byte

func fingerprintOf(path string) fingerprint {
	h := sha256.New()
	walkFingerprint(h, path, make(map[string]bool))
	var fp fingerprint
	h.Sum(fp[:0])
	return fp
}

func walkFingerprint(h io.Writer, path string, visited map[string]bool) {
	info, err := os.Stat(path)
	if err != nil {
		io.WriteString(h, "error\x00"+path+"\x00"+err.Error()+"\x00")
		return
	}
	if !info.IsDir() {
		var meta [16]byte
		binary.LittleEndian.PutUint64(meta[:8], uint64(info.Size()))
		binary.LittleEndian.PutUint64(meta[8:], uint64(info.ModTime().UnixNano()))
		io.WriteString(h, "file\x00"+path+"\x00")
		h.Write(meta[:])
		if f, err := os.Open(path); err == nil {
			io.Copy(h, f)
			f.Close()
		}
		return
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || visited[real] {
		return
	}
	visited[real] = true
	entries, err := os.ReadDir(path)
	if err != nil {
		io.WriteString(h, "error\x00"+path+"\x00"+err.Error()+"\x00")
		return
	}
	io.WriteString(h, "dir\x00"+path+"\x00")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			walkFingerprint(h, filepath.Join(path, e.Name()), visited)
		}
	}
}
