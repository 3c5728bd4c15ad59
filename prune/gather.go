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

	ri   int // current row run
	roff int // rows consumed from the current run
	src  []byte
	out  []byte // pending output
}

const chunkBytes = 4 << 20

func newGatherReader(ra io.ReaderAt, name string, shape []int, elemSize int, sel Selection, zero bool) (*gatherReader, error) {
	if len(shape) == 0 {
		// A scalar: one "row" of one element.
		shape = []int{1}
	}
	if err := checkSel(sel, shape); err != nil {
		return nil, err
	}
	n := elemSize
	for _, d := range shape[1:] {
		n *= d
	}
	g := &gatherReader{ra: ra, name: name, rowBytes: n, zero: zero}
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

func (g *gatherReader) Read(p []byte) (int, error) {
	if len(g.out) == 0 {
		if g.emitted >= g.total {
			return 0, io.EOF
		}
		if err := g.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	g.emitted += int64(n)
	return n, nil
}

// fill produces the next chunk of output rows into g.out.
func (g *gatherReader) fill() error {
	for g.ri < len(g.rows) && g.roff >= g.rows[g.ri].n {
		g.ri++
		g.roff = 0
	}
	if g.ri >= len(g.rows) {
		return io.ErrUnexpectedEOF
	}
	r := g.rows[g.ri]
	per := max(1, chunkBytes/max(1, max(g.rowBytes, g.outRow)))
	k := min(per, r.n-g.roff)
	outLen := k * g.outRow
	if cap(g.out) < outLen {
		g.out = make([]byte, 0, outLen)
	}
	out := g.out[:0]
	if g.zero || r.start < 0 {
		out = appendZeros(out, outLen)
	} else {
		first := r.start + g.roff
		srcLen := k * g.rowBytes
		if g.cols == nil {
			out = out[:srcLen]
			if err := g.readAt(out, int64(first)*int64(g.rowBytes)); err != nil {
				return err
			}
		} else {
			if cap(g.src) < srcLen {
				g.src = make([]byte, srcLen)
			}
			src := g.src[:srcLen]
			if err := g.readAt(src, int64(first)*int64(g.rowBytes)); err != nil {
				return err
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
	g.out = out
	return nil
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
