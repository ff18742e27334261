package server

import (
	"crypto/sha256"
	"encoding/binary"
	"io"

	"github.com/seed7fbd42b6/ratelimit/cmd/ratelimitd/internal/config"
)

// fingerprint is a digest of what config.Load would read at path, and of
// the TLS files (read again with the configuration): the files' names,
// sizes, modification times and contents, and any error met listing them,
// so that any change to either changes it. It opens only the regular
// files Load reads.
type fingerprint [sha256.Size]byte

func fingerprintOf(path string, tlsFiles TLSFiles) fingerprint {
	h := sha256.New()
	files, err := config.Files(path)
	if err != nil {
		io.WriteString(h, "error\x00"+err.Error()+"\x00")
	}
	for _, name := range files {
		hashFile(h, name)
	}
	for _, name := range []string{tlsFiles.CertFile, tlsFiles.KeyFile, tlsFiles.ClientCAFile} {
		if name != "" {
			io.WriteString(h, "tls\x00")
			hashFile(h, name)
		}
	}
	var fp fingerprint
	h.Sum(fp[:0])
	return fp
}

// hashFile writes name's size, modification time and contents to h, if
// it is a regular file. It opens name without blocking and checks the
// file it opened, so that a file replaced by a pipe since it was listed
// cannot hold it.
func hashFile(h io.Writer, name string) {
	f, err := openNonBlocking(name)
	if err != nil {
		io.WriteString(h, "missing\x00"+name+"\x00")
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		io.WriteString(h, "missing\x00"+name+"\x00")
		return
	}
	var meta [16]byte
	binary.LittleEndian.PutUint64(meta[:8], uint64(info.Size()))
	binary.LittleEndian.PutUint64(meta[8:], uint64(info.ModTime().UnixNano()))
	io.WriteString(h, "file\x00"+name+"\x00")
	h.Write(meta[:])
	io.Copy(h, f)
}
