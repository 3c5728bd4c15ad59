//go:build !linux

package sandbox

import (
	"errors"
	"testing"
)

func TestUnsupported(t *testing.T) {
	_, err := New("", Limits{})
	var ue *UnsupportedError
	if !errors.As(err, &ue) {
		t.Errorf("got %v, want an *UnsupportedError", err)
	}
}
