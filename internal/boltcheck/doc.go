// Package boltcheck reads a bbolt file's pages itself, with every offset
// and length checked against the file, to find structural damage before
// bbolt walks the file.
//
// bbolt trusts its pages: it reads them through an unchecked memory
// mapping, and when it opens a file whose freelist is not synced (as the
// limiter writes it) it rebuilds the freelist by walking every page on a
// goroutine of its own, where a damaged page is a panic or a fault that no
// recover can catch: the whole process dies. Check refuses such a file
// with an error first. It accepts exactly the files whose every page that
// walk reaches is well formed:
//
//   - two valid meta pages (magic, version, FNV-64a checksum: bbolt would
//     fall back to the older one if the newer were damaged, silently losing
//     the last transaction), a page size that is a power of two from 1 KiB
//     to 64 KiB, a high-water mark the file reaches, and a root and
//     freelist page below it (of the newer meta);
//   - every page reachable from the root bucket, and from every nested
//     bucket, below the high-water mark with its overflow, reached once, of
//     the type its parent expects, and naming itself in its header;
//   - every element, key and value inside its page; keys strictly
//     increasing within a page and within the range its parent gives it;
//     a bucket value long enough for its header (and its inline page);
//   - a synced freelist, if any, well formed, naming only pages below the
//     high-water mark that no bucket reaches.
//
// Read leniently visits what can be read of a damaged file (see Walk), for
// salvage.
package boltcheck
