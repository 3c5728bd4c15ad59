// Package hardware is the catalog of accelerators the estimator prices a model
// on: memory, memory bandwidth, dense tensor throughput per data type and the
// link used for tensor-parallel all-reduce.
//
// # Conventions
//
// All figures are dense (non-sparse) peak rates in SI units: bytes, bytes per
// second, FLOP per second. BF16FLOPS is the rate PyTorch-based engines (vLLM,
// SGLang, TensorRT-LLM) get for BF16/FP16 matrix products: on GeForce cards
// that is the FP32-accumulate rate, half the FP16-accumulate rate NVIDIA
// advertises, because their GEMMs accumulate in FP32. FP16AccFLOPS is the
// FP16-accumulate rate, which llama.cpp's CUDA backend does reach: its cuBLAS
// path multiplies F16 (and, for batches above 32 in 2023–24 builds,
// dequantized) weights with CUBLAS_COMPUTE_16F (estimate uses it there).
//
// Every built-in entry carries its source. Users add devices with ParseFile
// (YAML or JSON, see Parse), which also reads AIConfigurator's systems/*.yaml.
package hardware

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// LinkKind names the interconnect used between GPUs of one tensor-parallel group.
type LinkKind string

// Link kinds.
const (
	NVLink  LinkKind = "nvlink"
	PCIe    LinkKind = "pcie"
	Unified LinkKind = "unified" // a single-device system (Apple, Jetson, CPU)
)

// Backend is the compute backend family, used to choose fitted coefficients.
type Backend string

// Backends.
const (
	CUDA  Backend = "cuda"
	Metal Backend = "metal"
	CPU   Backend = "cpu"
)

// GPU describes one accelerator (or a CPU used as one).
type GPU struct {
	Name        string // catalog key, e.g. "h100-sxm"
	Description string // e.g. "NVIDIA H100 SXM5 80GB"
	Backend     Backend

	// MemoryBytes is the device memory CUDA reports on Linux (cudaMemGetInfo
	// total = torch.cuda.get_device_properties().total_memory), the figure
	// engines multiply by their memory fraction; it is nvidia-smi's total
	// less the driver's reservation. Entries without a CUDA figure use
	// nvidia-smi's total (see the Source string and hardware/MEMORY.md).
	MemoryBytes int64
	// UsableFraction is the share of MemoryBytes the accelerator may allocate
	// (Apple: ~0.75 by default, recommendedMaxWorkingSetSize); 1 when all.
	UsableFraction float64
	// BandwidthBps is the peak memory bandwidth in bytes per second.
	BandwidthBps float64

	BF16FLOPS    float64 // dense BF16/FP16 with FP32 accumulate (what engines get)
	FP16AccFLOPS float64 // dense FP16 with FP16 accumulate (GeForce marketing figure); 0 if same
	FP8FLOPS     float64 // dense FP8; 0 if unsupported
	FP4FLOPS     float64 // dense FP4 (NVFP4/MXFP4); 0 if unsupported
	INT8FLOPS    float64 // dense INT8 tensor ops; 0 if unsupported

	// LinkBps is the per-GPU, one-direction bandwidth of the TP link.
	LinkBps float64
	Link    LinkKind
	// GPUsPerNode is the most GPUs of this kind one node holds (8 in an HGX
	// board or a PCIe server, 72 in an NVL72 rack, 1 for Apple silicon,
	// Jetson and the CPU): it bounds a node's GPU count (see Node) and so the
	// TP degree over LinkBps.
	GPUsPerNode int

	// Source names where the figures come from.
	Source string
}

// UsableBytes returns the bytes the accelerator may allocate.
func (g *GPU) UsableBytes() int64 {
	f := g.UsableFraction
	if f <= 0 || f > 1 {
		f = 1
	}
	return int64(float64(g.MemoryBytes) * f)
}

// PeakFLOPS returns the dense tensor rate for the compute data type of a
// weight format: "bf16", "fp16", "fp8", "fp4", "int8". Types the device lacks
// fall back to BF16: engines run FP4 weights on pre-Blackwell GPUs as W4A16
// (dequantised to BF16, e.g. Marlin) and FP8 ones on Ampere likewise.
func (g *GPU) PeakFLOPS(dtype string) float64 {
	switch dtype {
	case "fp4":
		if g.FP4FLOPS > 0 {
			return g.FP4FLOPS
		}
	case "fp8":
		if g.FP8FLOPS > 0 {
			return g.FP8FLOPS
		}
	case "int8":
		if g.INT8FLOPS > 0 {
			return g.INT8FLOPS
		}
	}
	return g.BF16FLOPS
}

// Validate reports a missing or impossible figure.
func (g *GPU) Validate() error {
	var errs []string
	if g.Name == "" {
		errs = append(errs, "name is empty")
	}
	if g.MemoryBytes <= 0 {
		errs = append(errs, fmt.Sprintf("memory must be > 0 bytes (got %d)", g.MemoryBytes))
	}
	if g.BandwidthBps <= 0 {
		errs = append(errs, fmt.Sprintf("memory bandwidth must be > 0 (got %g B/s)", g.BandwidthBps))
	}
	if g.BF16FLOPS <= 0 {
		errs = append(errs, fmt.Sprintf("bf16 FLOPS must be > 0 (got %g)", g.BF16FLOPS))
	}
	if g.UsableFraction < 0 || g.UsableFraction > 1 {
		errs = append(errs, fmt.Sprintf("usable fraction must be in (0,1] (got %g)", g.UsableFraction))
	}
	if g.FP8FLOPS < 0 || g.FP4FLOPS < 0 || g.INT8FLOPS < 0 || g.LinkBps < 0 {
		errs = append(errs, "rates must not be negative")
	}
	if g.GPUsPerNode < 0 {
		errs = append(errs, fmt.Sprintf("GPUs per node must be ≥ 1 (got %d)", g.GPUsPerNode))
	}
	if len(errs) > 0 {
		return fmt.Errorf("device %q: %s", g.Name, strings.Join(errs, "; "))
	}
	return nil
}

// UnknownError is returned by Lookup for a name not in the catalog.
type UnknownError struct {
	Name  string
	Valid []string
}

func (e *UnknownError) Error() string { return e.Spell(nil) }

// Spell returns the message with the device-file setting spelled by spell
// (a command's flags); nil gives the library's words (Error).
func (e *UnknownError) Spell(spell func(name string) string) string {
	add := "a device file (LoadFile)"
	if spell != nil {
		add = spell("device-file")
	}
	return fmt.Sprintf("unknown GPU %q; valid names: %s (or add one with %s)", e.Name, strings.Join(e.Valid, ", "), add)
}

// ErrUnknown is matched by errors.Is for an *UnknownError.
var ErrUnknown = errors.New("unknown GPU")

// Is makes errors.Is(err, ErrUnknown) true.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknown }

// Catalog is a set of devices by name.
type Catalog struct {
	byName map[string]*GPU
}

// Default returns a new catalog holding the built-in devices.
func Default() *Catalog {
	c := &Catalog{byName: map[string]*GPU{}}
	for i := range builtin {
		g := builtin[i]
		if g.UsableFraction == 0 {
			g.UsableFraction = 1
		}
		c.byName[g.Name] = &g
	}
	return c
}

// LoadCatalog returns the built-in devices plus those of the YAML or JSON
// device file at path (see ParseFile); "" adds none. A device of the file
// replaces a built-in one of the same name.
func LoadCatalog(path string) (*Catalog, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	gs, err := ParseFile(path)
	if err != nil {
		return nil, err
	}
	if err := c.Add(gs...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Add inserts or replaces devices after validating them.
func (c *Catalog) Add(gs ...GPU) error {
	for i := range gs {
		g := gs[i]
		g.Name = normalize(g.Name)
		if g.UsableFraction == 0 {
			g.UsableFraction = 1
		}
		if g.Backend == "" {
			g.Backend = CUDA
		}
		if err := g.Validate(); err != nil {
			return err
		}
		c.byName[g.Name] = &g
	}
	return nil
}

// Names returns the device names, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.byName))
	for n := range c.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the device with that name (case-insensitive; '_' and ' '
// are read as '-'; a few aliases such as "h100" or "h200_sxm" are accepted).
func (c *Catalog) Lookup(name string) (*GPU, error) {
	n := normalize(name)
	if g, ok := c.byName[n]; ok {
		return g, nil
	}
	if a, ok := aliases[n]; ok {
		if g, ok := c.byName[a]; ok {
			return g, nil
		}
	}
	return nil, &UnknownError{Name: name, Valid: c.Names()}
}

// Node is a deployment target: Count GPUs of one kind in one node, joined
// by the GPU's link. A tensor-parallel group uses TP ≤ Count of them.
type Node struct {
	GPU   *GPU
	Count int
}

// String names the node as LookupNode reads it: "rtx-4090x2"; a single GPU
// is its bare name.
func (n Node) String() string {
	if n.Count <= 1 {
		return n.GPU.Name
	}
	return fmt.Sprintf("%sx%d", n.GPU.Name, n.Count)
}

// CountError is a GPU count a node of that kind cannot hold.
type CountError struct {
	GPU   string
	Count int
	Max   int
}

func (e *CountError) Error() string {
	if e.Count < 1 {
		return fmt.Sprintf("GPU count %d: a node holds at least 1 GPU", e.Count)
	}
	return fmt.Sprintf("GPU count %d: one %s node holds 1 to %d", e.Count, e.GPU, e.Max)
}

// CheckCount reports whether n GPUs of this kind fit in one node
// (1 ≤ n ≤ GPUsPerNode).
func (g *GPU) CheckCount(n int) error {
	if n < 1 || n > max(g.GPUsPerNode, 1) {
		return &CountError{GPU: g.Name, Count: n, Max: max(g.GPUsPerNode, 1)}
	}
	return nil
}

// SplitCount splits a node name "NAMExN" (or "NAME*N") into the device
// name and the count N; ok is false when the name ends in no count.
func SplitCount(name string) (base string, count int, ok bool) {
	s := strings.TrimSpace(name)
	i := strings.LastIndexAny(s, "xX*")
	if i <= 0 || i == len(s)-1 || len(s)-i > 8 {
		return s, 0, false
	}
	n := 0
	for _, c := range s[i+1:] {
		if c < '0' || c > '9' {
			return s, 0, false
		}
		n = n*10 + int(c-'0')
	}
	return s[:i], n, true
}

// LookupNode resolves a node name: a device name, optionally with a count
// ("rtx-4090x2", "h100-sxm*8"). A name the catalog holds as a whole is a
// device name. count overrides the name's count when > 0; with neither the
// count is 0, meaning "as many as the deployment uses". The count is
// checked against GPUsPerNode.
func (c *Catalog) LookupNode(name string, count int) (Node, error) {
	g, err := c.Lookup(name)
	n := 0
	if err != nil {
		base, k, ok := SplitCount(name)
		if !ok {
			return Node{}, err
		}
		g2, err2 := c.Lookup(base)
		if err2 != nil {
			return Node{}, err
		}
		if k < 1 {
			return Node{}, &CountError{GPU: g2.Name, Count: k}
		}
		g, n = g2, k
	}
	if count > 0 {
		if n > 0 && n != count {
			return Node{}, fmt.Errorf("node %q says %d GPUs but the count given is %d", name, n, count)
		}
		n = count
	} else if count < 0 {
		return Node{}, &CountError{GPU: g.Name, Count: count}
	}
	if n > 0 {
		if err := g.CheckCount(n); err != nil {
			return Node{}, err
		}
	}
	return Node{GPU: g, Count: n}, nil
}

// Lookup finds a built-in device; see Catalog.Lookup.
func Lookup(name string) (*GPU, error) { return defaultCatalog.Lookup(name) }

// Names lists the built-in devices.
func Names() []string { return defaultCatalog.Names() }

var defaultCatalog = Default()

func normalize(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.NewReplacer("_", "-", " ", "-").Replace(s)
	return s
}

var aliases = map[string]string{
	"h100":                "h100-sxm",
	"h100-sxm5":           "h100-sxm",
	"h200-sxm":            "h200",
	"b200-sxm":            "b200",
	"b300-sxm":            "b300",
	"a100":                "a100-80gb",
	"a100-sxm":            "a100-80gb",
	"a100-80gb-sxm":       "a100-80gb",
	"rtx-pro-6000-server": "rtx-pro-6000",
	"rtx-6000-pro":        "rtx-pro-6000",
	"jetson-orin":         "jetson-agx-orin-64gb",
	"m3-max":              "apple-m3-max",
	"m4-max":              "apple-m4-max",
	"cpu":                 "cpu-local",
}
