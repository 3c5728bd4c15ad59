package prune

import (
	"fmt"
)

// Selection picks rows (dimension 0) and columns (dimension 1) of a tensor.
// A nil list keeps the whole dimension; an index of -1 yields a zero-filled
// row or column (padding). Dimensions after the second are carried whole.
type Selection struct {
	Rows, Cols []int
	// Inner are the indices kept along dimension 2 of a 3-D tensor (nil:
	// all), as gpt-oss's stacked expert down_proj [experts, width, hidden]
	// needs when the hidden size is pruned.
	Inner []int
}

// IsIdentity reports whether the selection keeps a tensor of the given shape
// unchanged.
func (s Selection) IsIdentity(shape []int) bool {
	if s.Rows != nil && (len(shape) < 1 || !isRange(s.Rows, shape[0])) {
		return false
	}
	if s.Cols != nil && (len(shape) < 2 || !isRange(s.Cols, shape[1])) {
		return false
	}
	if s.Inner != nil && (len(shape) != 3 || !isRange(s.Inner, shape[2])) {
		return false
	}
	return true
}

// Shape returns the shape of the selected tensor.
func (s Selection) Shape(shape []int) []int {
	out := append([]int(nil), shape...)
	if s.Rows != nil && len(out) >= 1 {
		out[0] = len(s.Rows)
	}
	if s.Cols != nil && len(out) >= 2 {
		out[1] = len(s.Cols)
	}
	if s.Inner != nil && len(out) == 3 {
		out[2] = len(s.Inner)
	}
	return out
}

// run is a contiguous stretch of source units (start = -1: zeros).
type run struct{ start, n int }

// runs coalesces an index list into contiguous runs.
func runs(idx []int) []run {
	var rs []run
	for _, v := range idx {
		if len(rs) > 0 {
			last := &rs[len(rs)-1]
			if v < 0 && last.start < 0 || v >= 0 && last.start >= 0 && last.start+last.n == v {
				last.n++
				continue
			}
		}
		if v < 0 {
			rs = append(rs, run{-1, 1})
		} else {
			rs = append(rs, run{v, 1})
		}
	}
	return rs
}

// checkIndex verifies every index of idx lies in [-1, n).
func checkIndex(idx []int, n int, what string) error {
	for i, v := range idx {
		if v < -1 || v >= n {
			return fmt.Errorf("%s index %d at position %d out of range [0, %d)", what, v, i, n)
		}
	}
	return nil
}

// Gather applies sel to the tensor src of the given shape, whose elements are
// elemSize bytes each (any dtype: 1 for int8/fp8, 2 for bf16/f16, 4 for f32,
// ...), and appends the result to dst. It copies whole contiguous runs, so a
// selection that keeps a tensor whole is one copy.
func Gather(dst, src []byte, shape []int, elemSize int, sel Selection) ([]byte, error) {
	if elemSize <= 0 {
		return dst, fmt.Errorf("element size %d", elemSize)
	}
	n := elemSize
	for _, d := range shape {
		if d < 0 {
			return dst, fmt.Errorf("negative dimension in shape %v", shape)
		}
		n *= d
	}
	if n != len(src) {
		return dst, fmt.Errorf("tensor of shape %v and %d-byte elements needs %d bytes, have %d", shape, elemSize, n, len(src))
	}
	if sel.Inner != nil {
		flat, fshape, err := flatInner(sel, shape)
		if err != nil {
			return dst, err
		}
		return Gather(dst, src, fshape, elemSize, flat)
	}
	if len(shape) == 0 {
		if sel.Rows != nil || sel.Cols != nil {
			return dst, fmt.Errorf("cannot select rows or columns of a scalar")
		}
		return append(dst, src...), nil
	}
	if sel.Cols != nil && len(shape) < 2 {
		return dst, fmt.Errorf("column selection on a 1-D tensor of shape %v", shape)
	}
	if err := checkIndex(sel.Rows, shape[0], "row"); err != nil {
		return dst, err
	}
	rowBytes := n / max(shape[0], 1)
	if shape[0] == 0 {
		rowBytes = 0
	}
	rows := sel.Rows
	if rows == nil {
		rows = seq(shape[0])
	}
	if sel.Cols == nil {
		for _, r := range runs(rows) {
			if r.start < 0 {
				dst = appendZeros(dst, r.n*rowBytes)
			} else {
				dst = append(dst, src[r.start*rowBytes:(r.start+r.n)*rowBytes]...)
			}
		}
		return dst, nil
	}
	if err := checkIndex(sel.Cols, shape[1], "column"); err != nil {
		return dst, err
	}
	colBytes := 0
	if shape[1] > 0 {
		colBytes = rowBytes / shape[1]
	}
	crs := runs(sel.Cols)
	outRow := len(sel.Cols) * colBytes
	for _, r := range rows {
		if r < 0 {
			dst = appendZeros(dst, outRow)
			continue
		}
		row := src[r*rowBytes : (r+1)*rowBytes]
		for _, c := range crs {
			if c.start < 0 {
				dst = appendZeros(dst, c.n*colBytes)
			} else {
				dst = append(dst, row[c.start*colBytes:(c.start+c.n)*colBytes]...)
			}
		}
	}
	return dst, nil
}

// flatInner rewrites a selection along dimension 2 of a 3-D tensor as
// one of rows and columns of the tensor viewed as [d0·d1, d2]: its rows
// are the selected (d0, d1) pairs in order, its columns sel.Inner. Other
// selections are returned as they are.
func flatInner(sel Selection, shape []int) (Selection, []int, error) {
	if sel.Inner == nil {
		return sel, shape, nil
	}
	if len(shape) != 3 {
		return sel, shape, fmt.Errorf("dimension-2 selection on a %d-D tensor of shape %v", len(shape), shape)
	}
	if err := checkIndex(sel.Rows, shape[0], "row"); err != nil {
		return sel, shape, err
	}
	if err := checkIndex(sel.Cols, shape[1], "column"); err != nil {
		return sel, shape, err
	}
	rows, cols := sel.Rows, sel.Cols
	if rows == nil {
		rows = seq(shape[0])
	}
	if cols == nil {
		cols = seq(shape[1])
	}
	flat := make([]int, 0, len(rows)*len(cols))
	for _, r := range rows {
		for _, c := range cols {
			if r < 0 || c < 0 {
				flat = append(flat, -1)
			} else {
				flat = append(flat, r*shape[1]+c)
			}
		}
	}
	return Selection{Rows: flat, Cols: sel.Inner}, []int{shape[0] * shape[1], shape[2]}, nil
}

func appendZeros(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		dst = dst[:len(dst)+n]
		clear(dst[len(dst)-n:])
		return dst
	}
	return append(dst, make([]byte, n)...)
}

// expand turns a list of block indices (heads, groups) into element indices:
// block b covers [b*size, (b+1)*size); -1 expands to size entries of -1.
// base is added to every non-negative result.
func expand(idx []int, size, base int) []int {
	out := make([]int, 0, len(idx)*size)
	for _, b := range idx {
		for j := range size {
			if b < 0 {
				out = append(out, -1)
			} else {
				out = append(out, base+b*size+j)
			}
		}
	}
	return out
}

// expandWithin is expand keeping only the channels within (nil: all) of
// each block: block b gives base+b*size+c for each c of within.
func expandWithin(idx []int, size int, within []int, base int) []int {
	if within == nil {
		return expand(idx, size, base)
	}
	out := make([]int, 0, len(idx)*len(within))
	for _, b := range idx {
		for _, c := range within {
			out = append(out, base+b*size+c)
		}
	}
	return out
}

// span returns base, base+1, ..., base+n-1.
func span(base, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = base + i
	}
	return out
}
