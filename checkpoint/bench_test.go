package checkpoint_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
)

// benchCheckpoint writes 8 tensors of 1024×2048 elements of dtype dt
// (8 MiB each for F32) into a temporary directory.
func benchCheckpoint(b *testing.B, dt checkpoint.DType) (string, []checkpoint.TensorSpec) {
	b.Helper()
	var specs []checkpoint.TensorSpec
	for i := range 8 {
		specs = append(specs, checkpoint.TensorSpec{Name: fmt.Sprintf("layers.%d.weight", i), DType: dt, Shape: []int64{1024, 2048}})
	}
	dir := b.TempDir()
	if err := testutil.Write(dir, specs, testutil.Options{Seed: 1}); err != nil {
		b.Fatal(err)
	}
	return dir, specs
}

func gbps(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }

// BenchmarkFloat32 converts every tensor of a memory-mapped checkpoint to
// float32 and, in the same iteration, memcpy's the same input bytes (copy
// into a reused buffer) as the physical reference. It reports input GB/s of
// both and their ratio.
func BenchmarkFloat32(b *testing.B) {
	for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16, checkpoint.F16} {
		b.Run(string(dt), func(b *testing.B) {
			dir, specs := benchCheckpoint(b, dt)
			r, err := checkpoint.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			dst := make([]float32, specs[0].NumElements())
			scratch := make([]byte, specs[0].Size())
			// Fault the mapping in once so that both paths read from memory.
			for _, s := range specs {
				if err := r.Float32Into(dst, s.Name); err != nil {
					b.Fatal(err)
				}
			}
			var conv, memcpy time.Duration
			var total int64
			b.ResetTimer()
			for range b.N {
				for _, s := range specs {
					src, _ := r.Bytes(s.Name)
					t0 := time.Now()
					copy(scratch, src)
					t1 := time.Now()
					if err := r.Float32Into(dst, s.Name); err != nil {
						b.Fatal(err)
					}
					conv += time.Since(t1)
					memcpy += t1.Sub(t0)
					total += s.Size()
				}
			}
			b.ReportMetric(gbps(total, conv), "GB/s")
			b.ReportMetric(gbps(total, memcpy), "memcpy-GB/s")
			b.ReportMetric(memcpy.Seconds()/conv.Seconds(), "x-memcpy")
		})
	}
}

// BenchmarkStreamedCopy copies a 64 MiB checkpoint tensor by tensor
// (Section → Writer.WriteTensorFrom, or the zero-copy Bytes view →
// Writer.WriteTensor; header rebuilt, fsync, rename) and, in
// the same iteration, the same file with io.Copy into a new file plus fsync.
// It reports GB/s of both and their ratio.
func BenchmarkStreamedCopy(b *testing.B) {
	for _, mode := range []string{"Section", "Bytes"} {
		b.Run(mode, func(b *testing.B) { benchCopy(b, mode) })
	}
}

func benchCopy(b *testing.B, mode string) {
	dir, specs := benchCheckpoint(b, checkpoint.F32)
	srcPath := filepath.Join(dir, checkpoint.SingleFileName)
	st, _ := os.Stat(srcPath)
	out := b.TempDir()
	var ours, peer time.Duration
	var total int64
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		in, err := os.Open(srcPath)
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(out, "iocopy"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, in); err != nil {
			b.Fatal(err)
		}
		f.Sync()
		f.Close()
		in.Close()
		t1 := time.Now()
		r, err := checkpoint.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		w, err := checkpoint.Create(filepath.Join(out, "streamed.safetensors"), specs, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range specs {
			if mode == "Section" {
				sec, _ := r.Section(s.Name)
				err = w.WriteTensorFrom(s.Name, sec)
			} else {
				var data []byte
				if data, err = r.Bytes(s.Name); err == nil {
					err = w.WriteTensor(s.Name, data)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		r.Close()
		ours += time.Since(t1)
		peer += t1.Sub(t0)
		total += st.Size()
	}
	b.ReportMetric(gbps(total, ours), "GB/s")
	b.ReportMetric(gbps(total, peer), "iocopy-GB/s")
	b.ReportMetric(peer.Seconds()/ours.Seconds(), "x-iocopy")
}
