package boltcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// ErrDamaged is wrapped by every error Check returns for a damaged file.
var ErrDamaged = errors.New("damaged bbolt file")

// The on-disk layout of bbolt (format version 2), native little-endian.
const (
	pageHeaderSize   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	elemSize         = 16 // branch: pos, ksize uint32, pgid uint64; leaf: flags, pos, ksize, vsize uint32
	bucketHeaderSize = 16 // root pgid uint64, sequence uint64
	metaSize         = 64 // magic, version, pageSize, flags uint32; root bucket; freelist, pgid, txid, checksum uint64

	branchPage   = 0x01
	leafPage     = 0x02
	metaPage     = 0x04
	freelistPage = 0x10

	bucketLeafFlag = 0x01

	boltMagic   = 0xED0CDAED
	boltVersion = 2
	noFreelist  = ^uint64(0)

	defaultPageSize = 4096
	minPageSize     = 1 << 10
	maxPageSize     = 1 << 16
	// maxDepth bounds how deep pages and buckets may nest: a B+tree of
	// bbolt's is a few levels deep, and a cycle or a long chain of
	// damaged pages must end the walk, not exhaust the stack.
	maxDepth = 256
)

// File is a bbolt file opened for checking: its chosen meta page.
type File struct {
	r        io.ReaderAt
	size     int64
	pageSize int
	hwm      uint64 // pages in use: 0 .. hwm-1
	end      uint64 // pages that can be read: hwm, or fewer in a file cut short (lenient)
	root     uint64 // the root bucket's page
	freelist uint64 // noFreelist when not synced
	seen     []uint64
	// metaErr is why the other meta page is invalid, when only one is.
	metaErr error
}

// PageSize is the file's page size.
func (f *File) PageSize() int { return f.pageSize }

// Pages is the number of pages in use (the high-water mark).
func (f *File) Pages() uint64 { return f.hwm }

// Open reads and validates the meta pages of the bbolt file r of size
// bytes. Both must be valid: bbolt would fall back to the older one when
// the newer is damaged, silently losing the file's last transaction (a
// commit already acknowledged). With strict false it chooses as bbolt
// does, the valid one with the higher transaction id, for salvage.
func Open(r io.ReaderAt, size int64, strict bool) (*File, error) {
	f := &File{r: r, size: size}
	m0, err0 := f.readMeta(0)
	if err0 == nil {
		f.pageSize = int(m0.pageSize)
	} else {
		f.pageSize = defaultPageSize // bbolt's guess when page 0 is unreadable
	}
	m1, err1 := f.readMeta(int64(f.pageSize))
	if err0 == nil && err1 == nil && m1.pageSize != m0.pageSize {
		err1 = damaged("meta page 1 has page size %d, meta page 0 %d", m1.pageSize, m0.pageSize)
	}
	var m meta
	switch {
	case strict && err0 != nil && err1 == nil:
		return nil, fmt.Errorf("%w (meta page 1 is valid: the file's last transaction may be lost)", err0)
	case strict && err1 != nil && err0 == nil:
		return nil, fmt.Errorf("%w (meta page 0 is valid: the file's last transaction may be lost)", err1)
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		m, f.metaErr = m0, err1
	case err1 == nil:
		m, f.metaErr = m1, err0
	default:
		return nil, fmt.Errorf("%w: no valid meta page: %v; %v", ErrDamaged, err0, err1)
	}
	f.pageSize = int(m.pageSize)
	f.hwm, f.root, f.freelist = m.pgid, m.root, m.freelist
	switch {
	case f.hwm < 3 || strict && f.hwm > uint64(f.size)/uint64(f.pageSize): // lenient: pages past the end fail as they are read
		return nil, damaged("high-water mark of %d pages, file holds %d", f.hwm, f.size/int64(f.pageSize))
	case f.root < 2 || f.root >= f.hwm:
		return nil, damaged("root bucket at page %d, outside 2..%d", f.root, f.hwm-1)
	case f.freelist != noFreelist && (f.freelist < 2 || f.freelist >= f.hwm):
		return nil, damaged("freelist at page %d, outside 2..%d", f.freelist, f.hwm-1)
	}
	f.end = min(f.hwm, uint64(f.size)/uint64(f.pageSize)) // a damaged meta page may claim any number
	f.seen = make([]uint64, (f.end+63)/64)
	return f, nil
}

type meta struct {
	pageSize                   uint32
	root, freelist, pgid, txid uint64
}

// readMeta reads and validates the meta page at off.
func (f *File) readMeta(off int64) (meta, error) {
	var b [pageHeaderSize + metaSize]byte
	if off+int64(len(b)) > f.size {
		return meta{}, damaged("meta page at %d beyond the end of the file (%d bytes)", off, f.size)
	}
	if _, err := f.r.ReadAt(b[:], off); err != nil {
		return meta{}, fmt.Errorf("reading the meta page at %d: %w", off, err)
	}
	if flags := binary.LittleEndian.Uint16(b[8:]); flags != metaPage {
		return meta{}, damaged("meta page at %d has flags %#x", off, flags)
	}
	m := b[pageHeaderSize:]
	h := fnv.New64a()
	h.Write(m[:56])
	switch {
	case binary.LittleEndian.Uint32(m[0:]) != boltMagic:
		return meta{}, damaged("meta page at %d: not a bbolt file", off)
	case binary.LittleEndian.Uint32(m[4:]) != boltVersion:
		return meta{}, damaged("meta page at %d: bbolt format version %d", off, binary.LittleEndian.Uint32(m[4:]))
	case binary.LittleEndian.Uint64(m[56:]) != h.Sum64():
		return meta{}, damaged("meta page at %d: checksum mismatch", off)
	}
	ps := binary.LittleEndian.Uint32(m[8:])
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return meta{}, damaged("meta page at %d: page size %d", off, ps)
	}
	return meta{
		pageSize: ps,
		root:     binary.LittleEndian.Uint64(m[16:]),
		freelist: binary.LittleEndian.Uint64(m[32:]),
		pgid:     binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}, nil
}

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}

// Check reads the whole bbolt file r of size bytes and returns nil if it
// is well formed (see the package doc), or an error wrapping ErrDamaged
// that describes the first damage found (or the read error). It never
// panics on any content and always ends.
func Check(r io.ReaderAt, size int64) error {
	f, err := Open(r, size, true)
	if err != nil {
		return err
	}
	w := walker{f: f, strict: true}
	if err := w.tree(f.root, nil, 0, nil); err != nil {
		return err
	}
	return f.checkFreelist()
}

// checkFreelist validates a synced freelist page and its page ids.
func (f *File) checkFreelist() error {
	if f.freelist == noFreelist {
		return nil
	}
	p, err := f.page(f.freelist, freelistPage)
	if err != nil {
		return err
	}
	ids := p.data[pageHeaderSize:]
	n := uint64(p.count)
	if p.count == 0xFFFF { // the count is the first id slot
		if len(ids) < 8 {
			return damaged("freelist page %d: no room for its count", p.id)
		}
		n, ids = binary.LittleEndian.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids))/8 {
		return damaged("freelist page %d: %d ids do not fit its %d bytes", p.id, n, len(ids))
	}
	for i := range n {
		id := binary.LittleEndian.Uint64(ids[8*i:])
		if id < 2 || id >= f.hwm {
			return damaged("freelist page %d: free page %d outside 2..%d", p.id, id, f.hwm-1)
		}
		if f.isSeen(id) {
			return damaged("freelist page %d: page %d is both free and in use", p.id, id)
		}
	}
	return nil
}

// page is one page (with its overflow) read into memory.
type page struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
	data     []byte // the page and its overflow pages
}

// page reads page id, which must be of type want (branch or leaf, or
// freelist), below the high-water mark with its overflow, and not
// reached before; it marks it reached.
func (f *File) page(id uint64, want uint16) (page, error) {
	if id < 2 || id >= f.hwm {
		return page{}, damaged("page %d outside 2..%d", id, f.hwm-1)
	}
	if id >= f.end {
		return page{}, damaged("page %d past the end of the file (%d pages)", id, f.end)
	}
	var h [pageHeaderSize]byte
	if _, err := f.r.ReadAt(h[:], int64(id)*int64(f.pageSize)); err != nil {
		return page{}, fmt.Errorf("reading page %d: %w", id, err)
	}
	p := page{
		id:       binary.LittleEndian.Uint64(h[0:]),
		flags:    binary.LittleEndian.Uint16(h[8:]),
		count:    binary.LittleEndian.Uint16(h[10:]),
		overflow: binary.LittleEndian.Uint32(h[12:]),
	}
	switch {
	case p.id != id:
		return page{}, damaged("page %d names itself %d", id, p.id)
	case p.flags&want == 0 || p.flags&(p.flags-1) != 0:
		return page{}, damaged("page %d has flags %#x", id, p.flags)
	case uint64(p.overflow) >= f.hwm-id:
		return page{}, damaged("page %d with %d overflow pages passes the high-water mark %d", id, p.overflow, f.hwm)
	case uint64(p.overflow) >= f.end-id:
		return page{}, damaged("page %d with %d overflow pages passes the end of the file (%d pages)", id, p.overflow, f.end)
	}
	for i := id; i <= id+uint64(p.overflow); i++ {
		if f.isSeen(i) {
			return page{}, damaged("page %d reached twice", i)
		}
		f.seen[i/64] |= 1 << (i % 64)
	}
	n := (int(p.overflow) + 1) * f.pageSize
	buf := make([]byte, n)
	if _, err := f.r.ReadAt(buf, int64(id)*int64(f.pageSize)); err != nil {
		return page{}, fmt.Errorf("reading page %d: %w", id, err)
	}
	p.data = buf
	return p, nil
}

func (f *File) isSeen(id uint64) bool { return id < f.end && f.seen[id/64]&(1<<(id%64)) != 0 }

// unsee forgets that p (and its overflow) was reached.
func (f *File) unsee(p page) {
	for i := p.id; i <= p.id+uint64(p.overflow); i++ {
		f.seen[i/64] &^= 1 << (i % 64)
	}
}

// elem is a branch or leaf element with its key (and value) located.
type elem struct {
	flags uint32 // leaf only
	child uint64 // branch only
	key   []byte
	value []byte // leaf only
}

// elems returns the elements of a page (or of an inline page held in
// data), checking that each lies inside data.
func elems(data []byte, flags, count uint16, id uint64) ([]elem, error) {
	if uint64(pageHeaderSize)+uint64(count)*elemSize > uint64(len(data)) {
		return nil, damaged("page %d: %d elements do not fit its %d bytes", id, count, len(data))
	}
	es := make([]elem, count)
	for i := range es {
		off := pageHeaderSize + i*elemSize
		b := data[off : off+elemSize]
		var pos, ksize, vsize uint64
		if flags == branchPage {
			pos, ksize = uint64(binary.LittleEndian.Uint32(b[0:])), uint64(binary.LittleEndian.Uint32(b[4:]))
			es[i].child = binary.LittleEndian.Uint64(b[8:])
		} else {
			es[i].flags = binary.LittleEndian.Uint32(b[0:])
			pos, ksize = uint64(binary.LittleEndian.Uint32(b[4:])), uint64(binary.LittleEndian.Uint32(b[8:]))
			vsize = uint64(binary.LittleEndian.Uint32(b[12:]))
		}
		start := uint64(off) + pos // pos counts from the element itself
		if start+ksize+vsize > uint64(len(data)) {
			return nil, damaged("page %d: element %d (key %d bytes, value %d) passes the end of its %d bytes", id, i, ksize, vsize, len(data))
		}
		es[i].key = data[start : start+ksize]
		if flags != branchPage {
			es[i].value = data[start+ksize : start+ksize+vsize]
		}
	}
	return es, nil
}

// walker walks a bucket tree. Strict, it stops at the first damage;
// otherwise it notes the damage, skips that subtree, and goes on, calling
// visit with every leaf entry it can read.
type walker struct {
	f        *File
	strict   bool
	visit    func(path [][]byte, key, value []byte, bucket bool)
	problems []error
}

// fail handles damage: returned when strict, noted otherwise.
func (w *walker) fail(err error) error {
	if w.strict {
		return err
	}
	w.problems = append(w.problems, err)
	return nil
}

// tree walks the bucket whose root is page root (or, for root 0, the
// inline page in inline), at nesting depth, named by path.
func (w *walker) tree(root uint64, inline []byte, depth int, path [][]byte) error {
	if depth > maxDepth {
		return w.fail(damaged("buckets nested deeper than %d", maxDepth))
	}
	if root == 0 {
		if len(inline) < pageHeaderSize {
			return w.fail(damaged("bucket %q: inline page of %d bytes", path, len(inline)))
		}
		flags, count := binary.LittleEndian.Uint16(inline[8:]), binary.LittleEndian.Uint16(inline[10:])
		if flags != leafPage {
			return w.fail(damaged("bucket %q: inline page has flags %#x", path, flags))
		}
		es, err := elems(inline, flags, count, 0)
		if err != nil {
			return w.fail(fmt.Errorf("bucket %q (inline): %w", path, err))
		}
		return w.leaf(es, nil, nil, depth, path)
	}
	_, err := w.node(root, nil, nil, depth, 0, path)
	return err
}

// node walks page id of a bucket's B+tree, whose keys must lie in
// [lo, hi) (nil: unbounded), and returns its largest key.
func (w *walker) node(id uint64, lo, hi []byte, bucketDepth, pageDepth int, path [][]byte) ([]byte, error) {
	if pageDepth > maxDepth {
		return nil, w.fail(damaged("bucket %q: pages nested deeper than %d", path, maxDepth))
	}
	p, err := w.f.page(id, branchPage|leafPage)
	if err != nil {
		return nil, w.fail(fmt.Errorf("bucket %q: %w", path, err))
	}
	es, err := elems(p.data, p.flags, p.count, id)
	if err == nil {
		err = keysInOrder(es, lo, hi, id)
	}
	if err != nil {
		// Not this tree's page: a damaged pointer may lead here to another
		// tree's, which its own parent may still claim.
		w.f.unsee(p)
		return nil, w.fail(fmt.Errorf("bucket %q: %w", path, err))
	}
	if p.flags == leafPage {
		if err := w.leaf(es, lo, hi, bucketDepth, path); err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return nil, nil
		}
		return es[len(es)-1].key, nil
	}
	if len(es) == 0 {
		return nil, w.fail(damaged("bucket %q: branch page %d has no children", path, id))
	}
	var largest []byte
	for i, e := range es {
		next := hi // a child's keys lie in [its key, the next child's key)
		if i+1 < len(es) {
			next = es[i+1].key
		}
		sub, err := w.node(e.child, e.key, next, bucketDepth, pageDepth+1, path)
		if err != nil {
			return nil, err
		}
		if sub != nil {
			largest = sub
		}
	}
	return largest, nil
}

// keysInOrder checks that the keys of a page increase strictly and lie in
// [lo, hi), as bbolt's consistency check requires.
func keysInOrder(es []elem, lo, hi []byte, id uint64) error {
	prev := lo
	for i, e := range es {
		if prev != nil && (bytes.Compare(prev, e.key) > 0 || i > 0 && bytes.Equal(prev, e.key)) {
			return damaged("page %d: key %d out of order", id, i)
		}
		if hi != nil && bytes.Compare(e.key, hi) >= 0 {
			return damaged("page %d: key %d beyond its parent's range", id, i)
		}
		prev = e.key
	}
	return nil
}

// leaf visits a leaf's entries and walks the buckets nested in it.
func (w *walker) leaf(es []elem, lo, hi []byte, depth int, path [][]byte) error {
	for _, e := range es {
		isBucket := e.flags&bucketLeafFlag != 0
		if w.visit != nil {
			w.visit(path, e.key, e.value, isBucket)
		}
		if !isBucket {
			continue
		}
		if len(e.value) < bucketHeaderSize {
			if err := w.fail(damaged("bucket %q: nested bucket %q has a %d-byte header", path, e.key, len(e.value))); err != nil {
				return err
			}
			continue
		}
		sub := append(path[:len(path):len(path)], bytes.Clone(e.key))
		if err := w.tree(binary.LittleEndian.Uint64(e.value), e.value[bucketHeaderSize:], depth+1, sub); err != nil {
			return err
		}
	}
	return nil
}
