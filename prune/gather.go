package prune

import (
	"fmt"
	"io"
)

// gatherReader streams the selection of a tensor stored at [0, size) of ra
// without holding the tensor in memory: it reads source rows in chunks of
// at most chunkBytes and emits the selected columns. With zero set it emits
// zeros of the selected shape.
type gatherReader struct {
	ra       io.ReaderAt
	name     string
	rowBytes int // bytes of one source row
	colBytes int // bytes of one column (product of dims after 1, times elemSize)
	rows     []run
	cols     []run // nil: whole rows
	outRow   int   // bytes of one output row
	zero     bool
	total    int64 // output bytes
	emitted  int64

	ri   int     // current row run
	roff int     // rows consumed from the current run
	src  *[]byte // source chunk buffer, shared between readers
	out  []byte  // pending output (when the caller's buffer is small)
}

const chunkBytes = 4 << 20

func newGatherReader(ra io.ReaderAt, name string, shape []int, elemSize int, sel Selection, zero bool, buf *[]byte) (*gatherReader, error) {
	if buf == nil {
		buf = new([]byte)
	}
	if len(shape) == 0 {
		// A scalar: one "row" of one element.
		shape = []int{1}
	}
	if err := checkSel(sel, shape); err != nil {
		return nil, err
	}
	sel, shape, err := flatInner(sel, shape)
	if err != nil {
		return nil, err
	}
	n := elemSize
	for _, d := range shape[1:] {
		n *= d
	}
	g := &gatherReader{ra: ra, name: name, rowBytes: n, zero: zero, src: buf}
	rows := sel.Rows
	if rows == nil {
		rows = seq(shape[0])
	}
	g.rows = runs(rows)
	g.outRow = n
	if sel.Cols != nil {
		if shape[1] > 0 {
			g.colBytes = n / shape[1]
		}
		g.cols = runs(sel.Cols)
		g.outRow = len(sel.Cols) * g.colBytes
	}
	g.total = int64(len(rows)) * int64(g.outRow)
	return g, nil
}

// Read fills p with the next output bytes. When p holds at least one
// output row, rows are gathered straight into p (one copy fewer); pending
// bytes of a partly read row are kept in g.out.
func (g *gatherReader) Read(p []byte) (int, error) {
	if len(g.out) == 0 {
		if g.emitted >= g.total {
			return 0, io.EOF
		}
		if g.outRow > 0 && len(p) >= g.outRow {
			out, err := g.fill(p[:0], len(p)/g.outRow)
			if err != nil {
				return 0, err
			}
			g.emitted += int64(len(out))
			return len(out), nil
		}
		out, err := g.fill(g.out[:0], 1<<30)
		if err != nil {
			return 0, err
		}
		g.out = out
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	g.emitted += int64(n)
	return n, nil
}

// fill appends up to maxRows next output rows (at most chunkBytes of
// source, within one run of rows) to dst.
func (g *gatherReader) fill(dst []byte, maxRows int) ([]byte, error) {
	for g.ri < len(g.rows) && g.roff >= g.rows[g.ri].n {
		g.ri++
		g.roff = 0
	}
	if g.ri >= len(g.rows) {
		return dst, io.ErrUnexpectedEOF
	}
	r := g.rows[g.ri]
	per := max(1, chunkBytes/max(1, max(g.rowBytes, g.outRow)))
	k := min(per, r.n-g.roff, maxRows)
	outLen := k * g.outRow
	out := dst
	if g.zero || r.start < 0 {
		out = appendZeros(out, outLen)
	} else {
		first := r.start + g.roff
		srcLen := k * g.rowBytes
		if g.cols == nil {
			if cap(out)-len(out) < srcLen {
				out = append(out, make([]byte, srcLen)...)[:len(out)]
			}
			buf := out[len(out) : len(out)+srcLen]
			if err := g.readAt(buf, int64(first)*int64(g.rowBytes)); err != nil {
				return dst, err
			}
			out = out[:len(out)+srcLen]
		} else {
			if cap(*g.src) < srcLen {
				*g.src = make([]byte, srcLen)
			}
			src := (*g.src)[:srcLen]
			if err := g.readAt(src, int64(first)*int64(g.rowBytes)); err != nil {
				return dst, err
			}
			for i := range k {
				row := src[i*g.rowBytes : (i+1)*g.rowBytes]
				for _, c := range g.cols {
					if c.start < 0 {
						out = appendZeros(out, c.n*g.colBytes)
					} else {
						out = append(out, row[c.start*g.colBytes:(c.start+c.n)*g.colBytes]...)
					}
				}
			}
		}
	}
	g.roff += k
	return out, nil
}

func (g *gatherReader) readAt(buf []byte, off int64) error {
	n, err := g.ra.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d of tensor %s: %w", len(buf), off, g.name, err)
}
