package corpus

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// R serialization type codes (R Internals, "Serialization Formats").
const (
	rSym      = 1
	rList     = 2
	rChar     = 9
	rLgl      = 10
	rInt      = 13
	rReal     = 14
	rStr      = 16
	rVec      = 19
	rEmptyEnv = 242
	rBaseEnv  = 241
	rGlobal   = 253
	rNil      = 254
	rRef      = 255
)

// Limits that keep a malformed file from allocating without bound.
const (
	maxRVector = 1 << 26 // elements in one vector
	maxRString = 1 << 28 // bytes in one CHARSXP
	maxRDepth  = 256     // nesting of lists
	maxRRecord = 1 << 30 // uncompressed size of one .rdb record
)

// RFormatError reports malformed R serialization data with the byte offset
// (in the uncompressed stream) where it was found.
type RFormatError struct {
	Off int64
	Msg string
}

func (e *RFormatError) Error() string {
	return fmt.Sprintf("R serialization: %s at byte %#x", e.Msg, e.Off)
}

// RValue is a decoded R object. Only the types needed for text data are
// represented: character vectors (Strings, with NA as a nil entry), integer,
// logical and double vectors, generic vectors and pairlists (Items), symbols
// (Symbol), and NULL (Type rNil).
type RValue struct {
	Type    int
	Strings []*string
	Ints    []int32
	Reals   []float64
	Items   []*RValue
	Tags    []string // pairlist tags, parallel to Items
	Symbol  string
	Attr    *RValue // attribute pairlist, nil when absent
}

// Attribute returns the attribute named name, or nil.
func (v *RValue) Attribute(name string) *RValue {
	if v == nil || v.Attr == nil {
		return nil
	}
	for i, t := range v.Attr.Tags {
		if t == name {
			return v.Attr.Items[i]
		}
	}
	return nil
}

// Names returns the "names" attribute as strings (NA as "").
func (v *RValue) Names() []string {
	n := v.Attribute("names")
	if n == nil {
		return nil
	}
	out := make([]string, len(n.Strings))
	for i, s := range n.Strings {
		if s != nil {
			out[i] = *s
		}
	}
	return out
}

type rReader struct {
	r    *bufio.Reader
	off  int64
	refs []*RValue
}

func (d *rReader) errf(format string, a ...any) error {
	return &RFormatError{Off: d.off, Msg: fmt.Sprintf(format, a...)}
}

func (d *rReader) read(p []byte) error {
	n, err := io.ReadFull(d.r, p)
	d.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return d.errf("unexpected end of data")
		}
		return &RFormatError{Off: d.off, Msg: err.Error()}
	}
	return nil
}

func (d *rReader) int() (int32, error) {
	var b [4]byte
	if err := d.read(b[:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// UnserializeR decodes one R object written by serialize() in XDR format
// (version 2 or 3), as found in .rds files and lazy-load database records.
func UnserializeR(r io.Reader) (*RValue, error) {
	d := &rReader{r: bufio.NewReader(r)}
	var magic [2]byte
	if err := d.read(magic[:]); err != nil {
		return nil, err
	}
	if magic != [2]byte{'X', '\n'} {
		return nil, &RFormatError{Off: 0, Msg: fmt.Sprintf("not XDR serialization (magic %q, want \"X\\n\")", magic[:])}
	}
	ver, err := d.int()
	if err != nil {
		return nil, err
	}
	if ver != 2 && ver != 3 {
		return nil, d.errf("unsupported serialization version %d", ver)
	}
	if _, err := d.int(); err != nil { // writer R version
		return nil, err
	}
	if _, err := d.int(); err != nil { // minimal reader version
		return nil, err
	}
	if ver == 3 {
		n, err := d.int()
		if err != nil {
			return nil, err
		}
		if n < 0 || n > 64 {
			return nil, d.errf("bad native encoding length %d", n)
		}
		if err := d.read(make([]byte, n)); err != nil {
			return nil, err
		}
	}
	return d.item(0)
}

func (d *rReader) length() (int, error) {
	n, err := d.int()
	if err != nil {
		return 0, err
	}
	if n == -1 { // long vector: two more ints
		hi, err := d.int()
		if err != nil {
			return 0, err
		}
		lo, err := d.int()
		if err != nil {
			return 0, err
		}
		v := int64(hi)<<32 | int64(uint32(lo))
		if v > maxRVector {
			return 0, d.errf("vector length %d exceeds the limit %d", v, maxRVector)
		}
		return int(v), nil
	}
	if n < 0 || n > maxRVector {
		return 0, d.errf("bad vector length %d", n)
	}
	return int(n), nil
}

func (d *rReader) charsxp() (*string, error) {
	n, err := d.int()
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return nil, nil // NA_STRING
	}
	if n < 0 || n > maxRString {
		return nil, d.errf("bad string length %d", n)
	}
	b := make([]byte, n)
	if err := d.read(b); err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

func (d *rReader) item(depth int) (*RValue, error) {
	if depth > maxRDepth {
		return nil, d.errf("objects nested deeper than %d", maxRDepth)
	}
	start := d.off
	flags, err := d.int()
	if err != nil {
		return nil, err
	}
	typ := int(flags & 0xff)
	hasAttr := flags&(1<<9) != 0
	hasTag := flags&(1<<10) != 0
	switch typ {
	case rNil, rEmptyEnv, rBaseEnv, rGlobal:
		return &RValue{Type: rNil}, nil
	case rRef:
		idx := int(uint32(flags) >> 8)
		if idx == 0 {
			i, err := d.int()
			if err != nil {
				return nil, err
			}
			idx = int(i)
		}
		if idx < 1 || idx > len(d.refs) {
			return nil, &RFormatError{Off: start, Msg: fmt.Sprintf("reference %d out of range (have %d)", idx, len(d.refs))}
		}
		return d.refs[idx-1], nil
	case rSym:
		flags2, err := d.int()
		if err != nil {
			return nil, err
		}
		if flags2&0xff != rChar {
			return nil, d.errf("symbol name has type %d, want CHARSXP", flags2&0xff)
		}
		s, err := d.charsxp()
		if err != nil {
			return nil, err
		}
		v := &RValue{Type: rSym}
		if s != nil {
			v.Symbol = *s
		}
		d.refs = append(d.refs, v)
		return v, nil
	case rList:
		v := &RValue{Type: rList}
		// A pairlist is a chain of cells; iterate instead of recursing on CDR.
		for cell := 0; ; cell++ {
			if cell > maxRVector {
				return nil, d.errf("pairlist longer than %d", maxRVector)
			}
			if hasAttr {
				a, err := d.item(depth + 1)
				if err != nil {
					return nil, err
				}
				if cell == 0 {
					v.Attr = a
				}
			}
			tag := ""
			if hasTag {
				t, err := d.item(depth + 1)
				if err != nil {
					return nil, err
				}
				tag = t.Symbol
			}
			car, err := d.item(depth + 1)
			if err != nil {
				return nil, err
			}
			v.Items = append(v.Items, car)
			v.Tags = append(v.Tags, tag)
			next, err := d.int()
			if err != nil {
				return nil, err
			}
			nt := int(next & 0xff)
			if nt == rNil {
				return v, nil
			}
			if nt != rList {
				return nil, d.errf("pairlist tail has type %d", nt)
			}
			hasAttr = next&(1<<9) != 0
			hasTag = next&(1<<10) != 0
		}
	case rChar:
		s, err := d.charsxp()
		if err != nil {
			return nil, err
		}
		return &RValue{Type: rStr, Strings: []*string{s}}, nil
	case rLgl, rInt:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		b := make([]byte, 4*n)
		if err := d.read(b); err != nil {
			return nil, err
		}
		v := &RValue{Type: typ, Ints: make([]int32, n)}
		for i := range v.Ints {
			v.Ints[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
		}
		return d.attrs(v, hasAttr, depth)
	case rReal:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		b := make([]byte, 8*n)
		if err := d.read(b); err != nil {
			return nil, err
		}
		v := &RValue{Type: typ, Reals: make([]float64, n)}
		for i := range v.Reals {
			v.Reals[i] = math.Float64frombits(binary.BigEndian.Uint64(b[8*i:]))
		}
		return d.attrs(v, hasAttr, depth)
	case rStr:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		v := &RValue{Type: rStr, Strings: make([]*string, 0, min(n, 1<<16))}
		for i := 0; i < n; i++ {
			f, err := d.int()
			if err != nil {
				return nil, err
			}
			if f&0xff != rChar {
				return nil, d.errf("element %d of a character vector has type %d, want CHARSXP", i, f&0xff)
			}
			s, err := d.charsxp()
			if err != nil {
				return nil, err
			}
			v.Strings = append(v.Strings, s)
		}
		return d.attrs(v, hasAttr, depth)
	case rVec:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		v := &RValue{Type: rVec, Items: make([]*RValue, 0, min(n, 1<<16))}
		for i := 0; i < n; i++ {
			it, err := d.item(depth + 1)
			if err != nil {
				return nil, err
			}
			v.Items = append(v.Items, it)
		}
		return d.attrs(v, hasAttr, depth)
	default:
		return nil, &RFormatError{Off: start, Msg: fmt.Sprintf("unsupported R object type %d (flags %#x)", typ, uint32(flags))}
	}
}

func (d *rReader) attrs(v *RValue, has bool, depth int) (*RValue, error) {
	if !has {
		return v, nil
	}
	a, err := d.item(depth + 1)
	if err != nil {
		return nil, err
	}
	v.Attr = a
	return v, nil
}

// LazyLoadDB is an R lazy-load database (the Rdata.rdx index and Rdata.rdb
// records of an installed package's data directory).
type LazyLoadDB struct {
	rdb     []byte
	offsets map[string][2]int64 // name -> (offset, length) in rdb
}

// OpenLazyLoadDB reads an index (.rdx) and its database (.rdb), given the
// path without extension, e.g. ".../janeaustenr/data/Rdata".
func OpenLazyLoadDB(base string) (*LazyLoadDB, error) {
	rdx, err := os.ReadFile(base + ".rdx")
	if err != nil {
		return nil, err
	}
	rdb, err := os.ReadFile(base + ".rdb")
	if err != nil {
		return nil, err
	}
	db, err := ParseLazyLoadDB(rdx, rdb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	return db, nil
}

// ParseLazyLoadDB parses an in-memory .rdx index (gzip-compressed) and keeps
// rdb for Object.
func ParseLazyLoadDB(rdx, rdb []byte) (*LazyLoadDB, error) {
	zr, err := gzip.NewReader(bytes.NewReader(rdx))
	if err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	idx, err := UnserializeR(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	if idx.Type != rVec {
		return nil, fmt.Errorf("reading index: top-level object has type %d, want a list", idx.Type)
	}
	names := idx.Names()
	var vars *RValue
	for i, n := range names {
		if n == "variables" && i < len(idx.Items) {
			vars = idx.Items[i]
		}
	}
	if vars == nil || vars.Type != rVec {
		return nil, errors.New("reading index: no \"variables\" list")
	}
	vn := vars.Names()
	if len(vn) != len(vars.Items) {
		return nil, fmt.Errorf("reading index: %d variables but %d names", len(vars.Items), len(vn))
	}
	db := &LazyLoadDB{rdb: rdb, offsets: map[string][2]int64{}}
	for i, it := range vars.Items {
		if len(it.Ints) != 2 {
			return nil, fmt.Errorf("reading index: variable %q: want an (offset, length) pair, got %d values", vn[i], len(it.Ints))
		}
		off, n := int64(it.Ints[0]), int64(it.Ints[1])
		if off < 0 || n < 4 || off+n > int64(len(rdb)) {
			return nil, fmt.Errorf("reading index: variable %q: record [%d, +%d) outside the %d-byte database", vn[i], off, n, len(rdb))
		}
		db.offsets[vn[i]] = [2]int64{off, n}
	}
	return db, nil
}

// Names returns the object names in the database, sorted.
func (db *LazyLoadDB) Names() []string {
	out := make([]string, 0, len(db.offsets))
	for n := range db.offsets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Object decodes the named object.
func (db *LazyLoadDB) Object(name string) (*RValue, error) {
	loc, ok := db.offsets[name]
	if !ok {
		return nil, fmt.Errorf("R lazy-load database: no object %q (have %v)", name, db.Names())
	}
	rec := db.rdb[loc[0] : loc[0]+loc[1]]
	ulen := binary.BigEndian.Uint32(rec[:4])
	if ulen > maxRRecord {
		return nil, fmt.Errorf("object %q at byte %#x: uncompressed length %d exceeds %d", name, loc[0], ulen, maxRRecord)
	}
	zr, err := zlib.NewReader(bytes.NewReader(rec[4:]))
	if err != nil {
		return nil, fmt.Errorf("object %q at byte %#x: %w", name, loc[0], err)
	}
	v, err := UnserializeR(io.LimitReader(zr, int64(ulen)))
	if err != nil {
		return nil, fmt.Errorf("object %q at byte %#x: %w", name, loc[0], err)
	}
	return v, nil
}
