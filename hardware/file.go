package hardware

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/autocompress/autocompress/internal/suggest"
)

// MaxFileSize caps the size of a device file.
const MaxFileSize = 1 << 20

// FormatError reports a malformed device file, with the line where known.
type FormatError struct {
	File string
	Line int // 1-based; 0 when not known
	Msg  string
}

func (e *FormatError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "device file"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", loc, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// ParseFile reads devices from a YAML or JSON file; see Parse. A device
// without a name is named after the file (base name without extension).
func ParseFile(path string) ([]GPU, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading device file: %w", err)
	}
	if st.Size() > MaxFileSize {
		return nil, &FormatError{File: path, Msg: fmt.Sprintf("file is %d bytes, more than the %d allowed", st.Size(), MaxFileSize)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading device file: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	gs, err := Parse(data, name)
	if err != nil {
		if fe, ok := err.(*FormatError); ok && fe.File == "" {
			fe.File = path
		}
		return nil, err
	}
	return gs, nil
}

// Parse reads one or more devices from YAML or JSON (decoded by yaml/v3,
// JSON being YAML): a mapping (one device), a list of them, or a mapping
// whose only key is "devices" holding the list; YAML may also separate
// devices with "---". An unknown key is an error naming its line and the
// closest known key, as the run configuration refuses one.
//
// Keys of one device (all optional except memory, bandwidth and BF16 rate;
// numbers may be quoted):
//
//	name, description, backend (cuda|metal|cpu), source
//	memory_bytes | memory_gib | memory_gb
//	usable_fraction                (0,1]
//	bandwidth_bps | bandwidth_gbs  memory bandwidth
//	bf16_tflops, fp16acc_tflops, fp8_tflops, fp4_tflops, int8_tflops
//	link (nvlink|pcie|unified), link_gbs, gpus_per_node
//
// AIConfigurator's systems/*.yaml layout is also accepted: gpu.mem_bw,
// gpu.mem_capacity, gpu.{bfloat16,fp8,fp4,int8}_tc_flops,
// node.intra_node_bw, node.num_gpus_per_node are read; the layout's other
// gpu and node keys are known and not used, and misc (its engine settings)
// and data_dir are not read. defaultName names a device that has no "name"
// key.
func Parse(data []byte, defaultName string) ([]GPU, error) {
	if len(data) > MaxFileSize {
		return nil, &FormatError{Msg: fmt.Sprintf("input is %d bytes, more than the %d allowed", len(data), MaxFileSize)}
	}
	docs, err := decodeDevices(data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, &FormatError{Msg: "no device found (empty file)"}
	}
	out := make([]GPU, 0, len(docs))
	for i, d := range docs {
		name := defaultName
		if len(docs) > 1 {
			name = fmt.Sprintf("%s-%d", defaultName, i+1)
		}
		g, err := d.gpu(name)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// deviceDoc is one device as a file writes it: the keys of Parse, or
// AIConfigurator's layout (GPU, Node, Misc, DataDir).
type deviceDoc struct {
	Name           string  `yaml:"name"`
	Description    string  `yaml:"description"`
	Backend        string  `yaml:"backend"`
	Source         string  `yaml:"source"`
	MemoryBytes    *number `yaml:"memory_bytes"`
	MemoryGiB      *number `yaml:"memory_gib"`
	MemoryGB       *number `yaml:"memory_gb"`
	UsableFraction *number `yaml:"usable_fraction"`
	BandwidthBps   *number `yaml:"bandwidth_bps"`
	BandwidthGBs   *number `yaml:"bandwidth_gbs"`
	BF16TFLOPS     *number `yaml:"bf16_tflops"`
	FP16AccTFLOPS  *number `yaml:"fp16acc_tflops"`
	FP8TFLOPS      *number `yaml:"fp8_tflops"`
	FP4TFLOPS      *number `yaml:"fp4_tflops"`
	INT8TFLOPS     *number `yaml:"int8_tflops"`
	Link           string  `yaml:"link"`
	LinkGBs        *number `yaml:"link_gbs"`
	GPUsPerNode    *number `yaml:"gpus_per_node"`

	GPU     *aicGPU   `yaml:"gpu"`
	Node    *aicNode  `yaml:"node"`
	Misc    yaml.Node `yaml:"misc"`     // AIConfigurator's engine settings: not read
	DataDir string    `yaml:"data_dir"` // AIConfigurator's measurement folder: not read
}

// aicGPU is the gpu section of AIConfigurator's systems/*.yaml.
type aicGPU struct {
	MemBW       *number `yaml:"mem_bw"`
	MemCapacity *number `yaml:"mem_capacity"`
	BF16        *number `yaml:"bfloat16_tc_flops"`
	FP8         *number `yaml:"fp8_tc_flops"`
	FP4         *number `yaml:"fp4_tc_flops"`
	INT8        *number `yaml:"int8_tc_flops"`
	// Known, not used.
	FP32       *number `yaml:"float32_tc_flops"`
	BWScaling  *number `yaml:"mem_bw_empirical_scaling_factor"`
	MemLatency *number `yaml:"mem_empirical_constant_latency"`
	Power      *number `yaml:"power"`
	SMVersion  *number `yaml:"sm_version"`
}

// aicNode is the node section of AIConfigurator's systems/*.yaml.
type aicNode struct {
	IntraNodeBW *number `yaml:"intra_node_bw"`
	GPUsPerNode *number `yaml:"num_gpus_per_node"`
	// Known, not used.
	InterNodeBW      *number `yaml:"inter_node_bw"`
	InterRackBW      *number `yaml:"inter_rack_bw"`
	InterRackLatency *number `yaml:"inter_rack_latency"`
	GPUsPerRack      *number `yaml:"num_gpus_per_rack"`
	P2PLatency       *number `yaml:"p2p_latency"`
	PCIeBW           *number `yaml:"pcie_bw"`
}

// devicesDoc is a mapping document whose only key, "devices", holds a list
// of devices.
type devicesDoc struct {
	Devices []deviceDoc `yaml:"devices"`
}

// devicesList is the shape a document's first pass finds.
const devicesList yaml.Kind = 1 << 10

// number is a numeric value as written (plain or quoted), with its line;
// deviceDoc.gpu reads it, naming the key in errors.
type number struct {
	text string
	line int
	kind yaml.Kind
}

func (n *number) UnmarshalYAML(node *yaml.Node) error {
	*n = number{text: node.Value, line: node.Line, kind: node.Kind}
	return nil
}

// decodeDevices decodes every document of data: a first pass learns each
// document's shape (a list, a mapping, nothing), a second decodes it
// strictly (unknown keys refused) into that shape.
func decodeDevices(data []byte) ([]deviceDoc, error) {
	var kinds []yaml.Kind
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, yamlError(err)
		}
		k := yaml.Kind(0) // an empty document ("---" alone)
		if len(n.Content) > 0 && n.Content[0].Tag != "!!null" {
			k = n.Content[0].Kind
		}
		if c := n.Content; k == yaml.MappingNode {
			keys := c[0].Content
			for i := 0; i+1 < len(keys); i += 2 {
				if keys[i].Value == "devices" {
					if len(keys) > 2 {
						return nil, &FormatError{Line: keys[i].Line, Msg: `a mapping that lists "devices" has no other keys`}
					}
					k = devicesList
				}
			}
		}
		kinds = append(kinds, k)
	}
	var docs []deviceDoc
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	for _, k := range kinds {
		var err error
		switch k {
		case yaml.SequenceNode:
			var list []deviceDoc
			err = dec.Decode(&list)
			docs = append(docs, list...)
		case devicesList:
			var d devicesDoc
			err = dec.Decode(&d)
			docs = append(docs, d.Devices...)
		case yaml.MappingNode:
			var d deviceDoc
			err = dec.Decode(&d)
			docs = append(docs, d)
		case 0:
			err = dec.Decode(new(yaml.Node))
		default:
			return nil, &FormatError{Msg: "want a device (a mapping of keys) or a list of devices, got a single value"}
		}
		if err != nil {
			return nil, yamlError(err)
		}
	}
	return docs, nil
}

var (
	yamlLine    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlUnknown = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// yamlError turns a yaml/v3 error into a *FormatError with its line: an
// unknown key names the closest known one.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return lineError(te.Errors[0])
	}
	return lineError(strings.TrimPrefix(err.Error(), "yaml: "))
}

func lineError(msg string) *FormatError {
	fe := &FormatError{Msg: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		fe.Line, _ = strconv.Atoi(m[1])
		fe.Msg = m[2]
	}
	if m := yamlUnknown.FindStringSubmatch(fe.Msg); m != nil {
		fe.Msg = suggest.Unknown("key", m[1], knownKeys)
	}
	if fe.Msg == "did not find expected key" {
		fe.Msg += " (check the indentation: the keys of one mapping line up)"
	}
	return fe
}

// knownKeys are every key a device file may use, for suggestions.
var knownKeys = func() []string {
	var keys []string
	for _, t := range []reflect.Type{reflect.TypeFor[deviceDoc](), reflect.TypeFor[aicGPU](), reflect.TypeFor[aicNode]()} {
		for i := range t.NumField() {
			keys = append(keys, strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0])
		}
	}
	return append(keys, "devices")
}()

// gpu converts one device; defaultName names it when it has no name.
func (d *deviceDoc) gpu(defaultName string) (GPU, error) {
	var g GPU
	var errs []string
	num := func(key string, n *number) (float64, bool) {
		if n == nil {
			return 0, false
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(n.text), 64)
		if n.kind != yaml.ScalarNode || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			what := fmt.Sprintf("%q is not a number", n.text)
			if n.kind != yaml.ScalarNode {
				what = "expected a number"
			}
			errs = append(errs, fmt.Sprintf("line %d: %s: %s", n.line, key, what))
			return 0, false
		}
		return f, true
	}
	g.Name = strings.TrimSpace(d.Name)
	if g.Name == "" {
		g.Name = defaultName
	}
	g.Description = strings.TrimSpace(d.Description)
	g.Source = strings.TrimSpace(d.Source)
	g.Backend = Backend(strings.ToLower(strings.TrimSpace(d.Backend)))
	switch g.Backend {
	case "", CUDA, Metal, CPU:
	default:
		errs = append(errs, fmt.Sprintf("backend: %q is not one of cuda, metal, cpu", g.Backend))
	}
	if v, ok := num("memory_bytes", d.MemoryBytes); ok {
		g.MemoryBytes = int64(v)
	}
	if v, ok := num("memory_gib", d.MemoryGiB); ok {
		g.MemoryBytes = int64(v * gib)
	}
	if v, ok := num("memory_gb", d.MemoryGB); ok {
		g.MemoryBytes = int64(v * 1e9)
	}
	if v, ok := num("usable_fraction", d.UsableFraction); ok {
		g.UsableFraction = v
	}
	if v, ok := num("bandwidth_bps", d.BandwidthBps); ok {
		g.BandwidthBps = v
	}
	if v, ok := num("bandwidth_gbs", d.BandwidthGBs); ok {
		g.BandwidthBps = v * gb
	}
	for _, r := range []struct {
		key string
		n   *number
		dst *float64
	}{{"bf16_tflops", d.BF16TFLOPS, &g.BF16FLOPS}, {"fp16acc_tflops", d.FP16AccTFLOPS, &g.FP16AccFLOPS}, {"fp8_tflops", d.FP8TFLOPS, &g.FP8FLOPS},
		{"fp4_tflops", d.FP4TFLOPS, &g.FP4FLOPS}, {"int8_tflops", d.INT8TFLOPS, &g.INT8FLOPS}} {
		if v, ok := num(r.key, r.n); ok {
			*r.dst = v * tb
		}
	}
	if s := strings.TrimSpace(d.Link); s != "" {
		g.Link = LinkKind(strings.ToLower(s))
	}
	if v, ok := num("link_gbs", d.LinkGBs); ok {
		g.LinkBps = v * gb
	}
	nodeCount := func(key string, n *number) {
		if v, ok := num(key, n); ok {
			if v < 1 || v != math.Trunc(v) || v > 1<<16 {
				errs = append(errs, fmt.Sprintf("%s: %g is not a whole number of GPUs from 1 to 65536", key, v))
			}
			g.GPUsPerNode = int(v)
		}
	}
	nodeCount("gpus_per_node", d.GPUsPerNode)
	if gm := d.GPU; gm != nil {
		if v, ok := num("gpu.mem_bw", gm.MemBW); ok {
			g.BandwidthBps = v
		}
		if v, ok := num("gpu.mem_capacity", gm.MemCapacity); ok {
			g.MemoryBytes = int64(v)
		}
		for _, r := range []struct {
			key string
			n   *number
			dst *float64
		}{{"gpu.bfloat16_tc_flops", gm.BF16, &g.BF16FLOPS}, {"gpu.fp8_tc_flops", gm.FP8, &g.FP8FLOPS},
			{"gpu.fp4_tc_flops", gm.FP4, &g.FP4FLOPS}, {"gpu.int8_tc_flops", gm.INT8, &g.INT8FLOPS}} {
			if v, ok := num(r.key, r.n); ok {
				*r.dst = v
			}
		}
		if g.Source == "" {
			g.Source = "AIConfigurator system file"
		}
	}
	if nm := d.Node; nm != nil {
		if v, ok := num("node.intra_node_bw", nm.IntraNodeBW); ok {
			g.LinkBps = v
		}
		nodeCount("node.num_gpus_per_node", nm.GPUsPerNode)
		if g.Link == "" {
			if g.LinkBps >= 200*gb {
				g.Link = NVLink
			} else {
				g.Link = PCIe
			}
		}
	}
	if len(errs) > 0 {
		return g, &FormatError{Msg: fmt.Sprintf("device %q: %s", g.Name, strings.Join(errs, "; "))}
	}
	if g.UsableFraction == 0 {
		g.UsableFraction = 1
	}
	if g.Backend == "" {
		g.Backend = CUDA
	}
	if g.Source == "" {
		g.Source = "user file"
	}
	if g.GPUsPerNode == 0 {
		g.GPUsPerNode = 1
	}
	if err := g.Validate(); err != nil {
		return g, &FormatError{Msg: err.Error() + " (set memory_gib, bandwidth_gbs and bf16_tflops)"}
	}
	return g, nil
}
