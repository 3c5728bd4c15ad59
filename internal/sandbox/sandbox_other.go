//go:build !linux

package sandbox

import (
	"context"
	"runtime"
)

// New reports that programs cannot be sandboxed here: the sandbox relies
// on Linux (its namespaces, the parent-death signal, waitid).
func New(python string, l Limits) (*Sandbox, error) {
	return nil, &UnsupportedError{OS: runtime.GOOS}
}

// Run is never reached: New fails on this system.
func (s *Sandbox) Run(ctx context.Context, program string) (*Result, error) {
	return nil, &UnsupportedError{OS: runtime.GOOS}
}
