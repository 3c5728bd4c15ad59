package checkpoint

import "fmt"

// DType is a safetensors element type, spelled as in the file header.
type DType string

// The element types this package understands.
const (
	F64     DType = "F64"
	F32     DType = "F32"
	F16     DType = "F16"
	BF16    DType = "BF16"
	F8E4M3  DType = "F8_E4M3" // OCP E4M3 "fn" variant: no infinities, NaN = 0x7f/0xff
	F8E5M2  DType = "F8_E5M2"
	I64     DType = "I64"
	I32     DType = "I32"
	I16     DType = "I16"
	I8      DType = "I8"
	U64     DType = "U64"
	U32     DType = "U32"
	U16     DType = "U16"
	U8      DType = "U8"
	Bool    DType = "BOOL"
	F8E8M0  DType = "F8_E8M0" // scale type of MX formats; read as raw bytes only
	invalid DType = ""
)

// DTypes lists every supported dtype.
var DTypes = []DType{F64, F32, F16, BF16, F8E4M3, F8E5M2, F8E8M0, I64, I32, I16, I8, U64, U32, U16, U8, Bool}

// Size returns the size of one element in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case F8E4M3, F8E5M2, F8E8M0, I8, U8, Bool:
		return 1
	}
	return 0
}

// Valid reports whether d is a dtype this package understands.
func (d DType) Valid() bool { return d.Size() != 0 }

// IsFloat reports whether Float32 can convert d.
func (d DType) IsFloat() bool {
	switch d {
	case F64, F32, F16, BF16, F8E4M3, F8E5M2:
		return true
	}
	return false
}

// TorchName returns the torch dtype name used in config.json's torch_dtype
// ("bfloat16", "float16", "float32", ...), or "" when there is none.
func (d DType) TorchName() string {
	switch d {
	case F64:
		return "float64"
	case F32:
		return "float32"
	case F16:
		return "float16"
	case BF16:
		return "bfloat16"
	case F8E4M3:
		return "float8_e4m3fn"
	case F8E5M2:
		return "float8_e5m2"
	case I64:
		return "int64"
	case I32:
		return "int32"
	case I16:
		return "int16"
	case I8:
		return "int8"
	case U8:
		return "uint8"
	case Bool:
		return "bool"
	}
	return ""
}

// ParseDType accepts a safetensors dtype ("BF16") or a torch dtype name
// ("bfloat16", "torch.bfloat16") and returns the safetensors dtype.
func ParseDType(s string) (DType, error) {
	if d := DType(s); d.Valid() {
		return d, nil
	}
	name := s
	if len(name) > 6 && name[:6] == "torch." {
		name = name[6:]
	}
	for _, d := range DTypes {
		if d.TorchName() == name {
			return d, nil
		}
	}
	switch name {
	case "float", "fp32", "f32":
		return F32, nil
	case "half", "fp16", "f16":
		return F16, nil
	case "bf16":
		return BF16, nil
	case "double", "f64":
		return F64, nil
	}
	return invalid, fmt.Errorf("checkpoint: unknown dtype %q (want one of F32, F16, BF16, F64, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL or a torch name such as bfloat16)", s)
}
