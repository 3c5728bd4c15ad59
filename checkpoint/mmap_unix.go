//go:build unix

package checkpoint

import (
	"os"
	"syscall"
)

// mmapFile maps f read-only. It returns nil and an error when mapping is not
// possible; callers then fall back to ReadAt.
func mmapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, syscall.EINVAL
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

func munmap(b []byte) error { return syscall.Munmap(b) }

// dontNeed drops b's pages from the resident set (b is page-aligned).
func dontNeed(b []byte) error { return syscall.Madvise(b, syscall.MADV_DONTNEED) }
