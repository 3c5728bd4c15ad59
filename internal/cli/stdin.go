package cli

import (
	"context"
	"io"
)

// ctxReader is an io.Reader that returns ctx's error as soon as ctx is
// cancelled, even while the underlying Read blocks (a terminal or a pipe
// with nothing to read): a command reading standard input stops when
// interrupted instead of waiting for the next line. The abandoned Read
// finishes in the background; its data is discarded.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
	buf []byte
	res chan ctxReadResult
}

type ctxReadResult struct {
	n   int
	err error
}

func newCtxReader(ctx context.Context, r io.Reader) *ctxReader {
	return &ctxReader{ctx: ctx, r: r, res: make(chan ctxReadResult, 1)}
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	buf := c.buf[:len(p)]
	go func() {
		n, err := c.r.Read(buf)
		c.res <- ctxReadResult{n, err}
	}()
	select {
	case r := <-c.res:
		copy(p, buf[:r.n])
		return r.n, r.err
	case <-c.ctx.Done():
		c.buf = nil // the background Read still owns buf
		return 0, c.ctx.Err()
	}
}
