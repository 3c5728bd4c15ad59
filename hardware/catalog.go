package hardware

const (
	gib = 1 << 30
	mib = 1 << 20
	tb  = 1e12 // TB/s and TFLOPS
	gb  = 1e9
)

// builtin is the catalog. Figures are dense peaks; "derived" marks arithmetic
// on public data rather than a published figure (see the package comment for
// the GeForce accumulate rule).
//
// MemoryBytes is the total CUDA reports on Linux (cudaMemGetInfo total =
// cudaDeviceProp.totalGlobalMem = torch.cuda.get_device_properties().total_memory,
// the "total capacity" in PyTorch's out-of-memory message), because that is
// what vLLM multiplies by gpu_memory_utilization and SGLang by
// mem_fraction_static. It is nvidia-smi's total less the driver's reserved
// memory (about 0.3–1.1 GiB) and changes by a few MiB between driver versions.
// Where no CUDA figure was found the nvidia-smi total is used and the Source
// says so. Provenance of every figure: MEMORY.md. Other figures follow
// AIConfigurator's systems/*.yaml where given (ai-dynamo/aiconfigurator
// @095f58a5, Apache-2.0).
// geforceNode is the most GeForce cards one node holds: 8 in a 4U PCIe
// server (the 8 × RTX 4090 / 5090 rental nodes); a desktop holds 1 or 2. The
// cards have no NVLink (the 3090's bridge pairs two), so tensor-parallel
// all-reduce runs over PCIe at LinkBps.
const geforceNode = 8

var builtin = []GPU{
	{
		// NVIDIA CES-2025 spec (988 AI TOPS FP4 sparse, 192-bit 28 Gbps GDDR7) via TweakTown,
		// TechPowerUp. Tensor rates derived: AI TOPS/8 = 123.5 TFLOPS FP16-acc, /2 for FP32-acc.
		Name: "rtx-5070", Description: "NVIDIA GeForce RTX 5070 12GB", Backend: CUDA,
		MemoryBytes: 12227 * mib, BandwidthBps: 672 * gb,
		BF16FLOPS: 61.75 * tb, FP16AccFLOPS: 123.5 * tb, FP8FLOPS: 123.5 * tb, FP4FLOPS: 247 * tb, INT8FLOPS: 247 * tb,
		LinkBps: 64 * gb, Link: PCIe, GPUsPerNode: geforceNode,
		Source: "NVIDIA CES-2025 spec (988 AI TOPS, 672 GB/s); tensor TFLOPS derived (costmodel.md §7); memory 12,227 MiB nvidia-smi total (no CUDA total found)",
	},
	{
		// 1,801 AI TOPS, 256-bit 30 Gbps GDDR7 (TweakTown; RTX Blackwell whitepaper summary).
		Name: "rtx-5080", Description: "NVIDIA GeForce RTX 5080 16GB", Backend: CUDA,
		MemoryBytes: 16303 * mib, BandwidthBps: 960 * gb,
		BF16FLOPS: 112.6 * tb, FP16AccFLOPS: 225.1 * tb, FP8FLOPS: 225.1 * tb, FP4FLOPS: 450.2 * tb, INT8FLOPS: 450.2 * tb,
		LinkBps: 64 * gb, Link: PCIe, GPUsPerNode: geforceNode,
		Source: "NVIDIA spec (1,801 AI TOPS, 960 GB/s) via TweakTown; tensor TFLOPS derived; memory 16,303 MiB nvidia-smi total (no CUDA total found)",
	},
	{
		// 3,352 AI TOPS; 838 TFLOPS FP16 sparse (Tom's Hardware spec box); 209.5 dense FP32-acc.
		Name: "rtx-5090", Description: "NVIDIA GeForce RTX 5090 32GB", Backend: CUDA,
		MemoryBytes: 32113 * mib, BandwidthBps: 1792 * gb,
		BF16FLOPS: 209.5 * tb, FP16AccFLOPS: 419 * tb, FP8FLOPS: 419 * tb, FP4FLOPS: 838 * tb, INT8FLOPS: 838 * tb,
		LinkBps: 64 * gb, Link: PCIe, GPUsPerNode: geforceNode,
		Source: "NVIDIA RTX Blackwell spec via Tom's Hardware (3,352 AI TOPS, 1,792 GB/s); 209.5 TFLOPS dense FP32-acc (codesota); memory CUDA total 31.36 GiB (PyTorch OOM message)",
	},
	{
		// Ada whitepaper: 330.3 TFLOPS FP16-acc dense, 165.2 FP32-acc; FP8 660.6 / 330.3.
		Name: "rtx-4090", Description: "NVIDIA GeForce RTX 4090 24GB", Backend: CUDA,
		MemoryBytes: 24218 * mib, BandwidthBps: 1008 * gb,
		BF16FLOPS: 165.2 * tb, FP16AccFLOPS: 330.3 * tb, FP8FLOPS: 330.3 * tb, INT8FLOPS: 660.6 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: geforceNode,
		Source: "NVIDIA Ada Lovelace whitepaper (via waredb/gigagpu): 1,008 GB/s, 165.2/330.3 TFLOPS; memory CUDA total 23.65 GiB (PyTorch OOM message; nvidia-smi 24,564 MiB)",
	},
	{
		// GA102 whitepaper: 71 TFLOPS FP16 tensor dense with FP32 accumulate (142 FP16-acc), 936 GB/s.
		Name: "rtx-3090", Description: "NVIDIA GeForce RTX 3090 24GB", Backend: CUDA,
		MemoryBytes: 24259 * mib, BandwidthBps: 936 * gb,
		BF16FLOPS: 71 * tb, FP16AccFLOPS: 142 * tb, INT8FLOPS: 284 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: geforceNode,
		Source: "NVIDIA Ampere GA102 whitepaper: 936 GB/s, 71 TFLOPS FP16/BF16 tensor (FP32 acc), 142 (FP16 acc); memory CUDA total 24,259 MiB (torch get_device_properties)",
	},
	// Older GeForce cards with published llama.cpp measurements
	// (estimate/groundtruth/testdata/llama_bench.md). Tensor rates are the
	// Ampere GA102/GA104 and Ada AD103/AD104 whitepapers' dense figures: FP16
	// tensor with FP16 accumulate = 4 × the FP32 shader rate, half that with
	// FP32 accumulate; INT8 = 2 × FP16-acc. Memory is the marketed size in
	// GiB (no CUDA total found); the figures were taken from the whitepapers'
	// published tables as tabulated elsewhere, not re-read from the PDFs here.
	{
		Name: "rtx-4080", Description: "NVIDIA GeForce RTX 4080 16GB", Backend: CUDA,
		MemoryBytes: 16 * gib, BandwidthBps: 716.8 * gb,
		BF16FLOPS: 97.5 * tb, FP16AccFLOPS: 194.9 * tb, FP8FLOPS: 194.9 * tb, INT8FLOPS: 389.9 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 1,
		Source: "NVIDIA Ada Lovelace whitepaper (AD103): 716.8 GB/s, 48.7 TFLOPS FP32, 194.9/97.5 TFLOPS FP16 tensor (FP16/FP32 acc), 389.9 INT8; memory 16 GiB nominal (no CUDA total found)",
	},
	{
		Name: "rtx-4070-ti", Description: "NVIDIA GeForce RTX 4070 Ti 12GB", Backend: CUDA,
		MemoryBytes: 12 * gib, BandwidthBps: 504 * gb,
		BF16FLOPS: 80.2 * tb, FP16AccFLOPS: 160.4 * tb, FP8FLOPS: 160.4 * tb, INT8FLOPS: 320.7 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 1,
		Source: "NVIDIA Ada Lovelace whitepaper (AD104): 504 GB/s, 40.1 TFLOPS FP32, 160.4/80.2 TFLOPS FP16 tensor (FP16/FP32 acc), 320.7 INT8; memory 12 GiB nominal (no CUDA total found)",
	},
	{
		Name: "rtx-3080-ti", Description: "NVIDIA GeForce RTX 3080 Ti 12GB", Backend: CUDA,
		MemoryBytes: 12 * gib, BandwidthBps: 912 * gb,
		BF16FLOPS: 68.2 * tb, FP16AccFLOPS: 136.4 * tb, INT8FLOPS: 272.8 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 1,
		Source: "NVIDIA Ampere GA102 figures: 912 GB/s, 34.1 TFLOPS FP32, 136.4/68.2 TFLOPS FP16 tensor (FP16/FP32 acc) derived 4×/2× FP32; memory 12 GiB nominal (no CUDA total found)",
	},
	{
		Name: "rtx-3080", Description: "NVIDIA GeForce RTX 3080 10GB", Backend: CUDA,
		MemoryBytes: 10 * gib, BandwidthBps: 760 * gb,
		BF16FLOPS: 59.5 * tb, FP16AccFLOPS: 119 * tb, INT8FLOPS: 238 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 1,
		Source: "NVIDIA Ampere GA102 whitepaper: 760 GB/s, 29.8 TFLOPS FP32, 119/59.5 TFLOPS FP16 tensor (FP16/FP32 acc), 238 INT8; memory 10 GiB nominal (no CUDA total found)",
	},
	{
		Name: "rtx-3070", Description: "NVIDIA GeForce RTX 3070 8GB", Backend: CUDA,
		MemoryBytes: 8 * gib, BandwidthBps: 448 * gb,
		BF16FLOPS: 40.6 * tb, FP16AccFLOPS: 81.3 * tb, INT8FLOPS: 162.6 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 1,
		Source: "NVIDIA Ampere GA104 figures: 448 GB/s, 20.3 TFLOPS FP32, 81.3/40.6 TFLOPS FP16 tensor (FP16/FP32 acc); memory 8 GiB nominal (no CUDA total found)",
	},
	{
		Name: "l4", Description: "NVIDIA L4 24GB", Backend: CUDA,
		MemoryBytes: 22487 * mib, BandwidthBps: 300 * gb,
		BF16FLOPS: 121 * tb, FP8FLOPS: 242 * tb, INT8FLOPS: 242 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 8,
		Source: "aiconfigurator systems/l4.yaml (NVIDIA datasheet: 242/485 TFLOPS FP8 dense/sparse); memory CUDA total 21.96 GiB (PyTorch OOM under vLLM; nvidia-smi 23,034 MiB)",
	},
	{
		Name: "l40s", Description: "NVIDIA L40S 48GB", Backend: CUDA,
		MemoryBytes: 45589 * mib, BandwidthBps: 864 * gb,
		BF16FLOPS: 362.05 * tb, FP8FLOPS: 733 * tb, INT8FLOPS: 733 * tb,
		LinkBps: 32 * gb, Link: PCIe, GPUsPerNode: 8,
		Source: "aiconfigurator systems/l40s.yaml (46,068 MiB, 864 GB/s, 362/733 TFLOPS); memory CUDA total 45,589 MiB (torch get_device_properties)",
	},
	{
		Name: "a100-40gb", Description: "NVIDIA A100 SXM4 40GB", Backend: CUDA,
		MemoryBytes: 40509 * mib, BandwidthBps: 1555 * gb,
		BF16FLOPS: 312 * tb, INT8FLOPS: 624 * tb,
		LinkBps: 300 * gb, Link: NVLink, GPUsPerNode: 8,
		Source: "NVIDIA A100 datasheet: 40GB HBM2 1,555 GB/s, 312 TFLOPS BF16 dense, NVLink 600 GB/s bidirectional; memory CUDA total 39.56 GiB (PyTorch OOM message)",
	},
	{
		Name: "a100-80gb", Description: "NVIDIA A100 SXM4 80GB", Backend: CUDA,
		MemoryBytes: 81050 * mib, BandwidthBps: 2039 * gb,
		BF16FLOPS: 312 * tb, INT8FLOPS: 624 * tb,
		LinkBps: 300 * gb, Link: NVLink, GPUsPerNode: 8,
		Source: "aiconfigurator systems/a100_sxm.yaml; NVIDIA A100 datasheet (2,039 GB/s, 312 TFLOPS); memory CUDA total 79.15 GiB (PyTorch OOM message; nvidia-smi 81,920 MiB)",
	},
	{
		Name: "h100-sxm", Description: "NVIDIA H100 SXM5 80GB", Backend: CUDA,
		MemoryBytes: 81090 * mib, BandwidthBps: 3350 * gb,
		BF16FLOPS: 989 * tb, FP8FLOPS: 1978 * tb, INT8FLOPS: 1978 * tb,
		LinkBps: 450 * gb, Link: NVLink, GPUsPerNode: 8,
		Source: "aiconfigurator systems/h100_sxm.yaml; llm-analysis h100-sxm-80gb.json; memory CUDA total 81,090 MiB (torch get_device_properties; nvidia-smi 81,559 MiB)",
	},
	{
		Name: "h100-pcie", Description: "NVIDIA H100 PCIe 80GB", Backend: CUDA,
		MemoryBytes: 81090 * mib, BandwidthBps: 2000 * gb,
		BF16FLOPS: 756.5 * tb, FP8FLOPS: 1513 * tb, INT8FLOPS: 1513 * tb,
		LinkBps: 64 * gb, Link: PCIe, GPUsPerNode: 8,
		Source: "aiconfigurator systems/h100_pcie.yaml (2 TB/s, 756.5/1,513 TFLOPS dense); memory CUDA total 79.19 GiB (PyTorch OOM message)",
	},
	{
		Name: "h200", Description: "NVIDIA H200 SXM 141GB", Backend: CUDA,
		MemoryBytes: 143165 * mib, BandwidthBps: 4800 * gb,
		BF16FLOPS: 989 * tb, FP8FLOPS: 1978 * tb, INT8FLOPS: 1978 * tb,
		LinkBps: 450 * gb, Link: NVLink, GPUsPerNode: 8,
		Source: "aiconfigurator systems/h200_sxm.yaml; memory CUDA total 139.81 GiB (PyTorch OOM message; nvidia-smi 143,771 MiB)",
	},
	{
		// GH200 Grace Hopper with 96 GB HBM3 (the part ALCF and most clouds run):
		// 4 TB/s; Hopper tensor rates as H100 SXM; NVLink 900 GB/s bidirectional.
		Name: "gh200", Description: "NVIDIA GH200 Grace Hopper 96GB HBM3", Backend: CUDA,
		MemoryBytes: 96768 * mib, BandwidthBps: 4000 * gb,
		BF16FLOPS: 989 * tb, FP8FLOPS: 1979 * tb, INT8FLOPS: 1979 * tb,
		LinkBps: 450 * gb, Link: NVLink, GPUsPerNode: 4,
		Source: "NVIDIA GH200 datasheet (96GB HBM3 4 TB/s; 989 TFLOPS BF16 dense); 97,871 MiB per nvidia-smi; memory CUDA total 94.50 GiB (reported CUDA-visible, NVIDIA GH200 480GB)",
	},
	{
		Name: "b200", Description: "NVIDIA B200 (HGX) 180GB", Backend: CUDA,
		MemoryBytes: 182631 * mib, BandwidthBps: 7700 * gb,
		BF16FLOPS: 2250 * tb, FP8FLOPS: 4500 * tb, FP4FLOPS: 9000 * tb, INT8FLOPS: 4500 * tb,
		LinkBps: 900 * gb, Link: NVLink, GPUsPerNode: 8,
		Source: "aiconfigurator systems/b200_sxm.yaml (Blackwell datasheet); memory CUDA total 182,631 MiB (torch get_device_properties)",
	},
	{
		Name: "b300", Description: "NVIDIA B300 (HGX, Blackwell Ultra) 288GB", Backend: CUDA,
		MemoryBytes: 288400343040, BandwidthBps: 7750 * gb,
		BF16FLOPS: 2250 * tb, FP8FLOPS: 4500 * tb, FP4FLOPS: 14000 * tb, INT8FLOPS: 153.5 * tb,
		LinkBps: 900 * gb, Link: NVLink, GPUsPerNode: 8,
		Source: "aiconfigurator systems/b300_sxm.yaml (Blackwell Ultra datasheet; 275,040 MiB per nvidia-smi)",
	},
	{
		Name: "gb200", Description: "NVIDIA GB200 NVL72 (per GPU)", Backend: CUDA,
		MemoryBytes: 198674743296, BandwidthBps: 8000 * gb,
		BF16FLOPS: 2500 * tb, FP8FLOPS: 5000 * tb, FP4FLOPS: 10000 * tb, INT8FLOPS: 5000 * tb,
		LinkBps: 900 * gb, Link: NVLink, GPUsPerNode: 72,
		Source: "aiconfigurator systems/gb200.yaml (189,471 MiB per nvidia-smi; NVLink 5 within the rack)",
	},
	{
		Name: "gb300", Description: "NVIDIA GB300 NVL72 (per GPU)", Backend: CUDA,
		MemoryBytes: 298013687808, BandwidthBps: 8000 * gb,
		BF16FLOPS: 2500 * tb, FP8FLOPS: 5000 * tb, FP4FLOPS: 15000 * tb, INT8FLOPS: 165 * tb,
		LinkBps: 900 * gb, Link: NVLink, GPUsPerNode: 72,
		Source: "aiconfigurator systems/gb300.yaml (284,208 MiB per nvidia-smi)",
	},
	{
		Name: "rtx-pro-6000", Description: "NVIDIA RTX PRO 6000 Blackwell Server 96GB", Backend: CUDA,
		MemoryBytes: 97250 * mib, BandwidthBps: 1792 * gb,
		BF16FLOPS: 467800534963698, FP8FLOPS: 935601069927397, FP4FLOPS: 1871202139854795, INT8FLOPS: 935601069927397,
		LinkBps: 64 * gb, Link: PCIe, GPUsPerNode: 8,
		Source: "aiconfigurator systems/rtx_pro_6000_server.yaml (dense, scaled to 2,430 MHz; 97,887 MiB); memory CUDA total 94.97 GiB = 97,250 MiB (PyTorch OOM message, torch)",
	},
	{
		// 2,048 CUDA / 64 tensor cores; 170 sparse INT8 TOPS on the GPU → ~42.5 FP16 dense (derived).
		// Memory is shared with the CPU and OS; ~85 % is left to the GPU in practice.
		Name: "jetson-agx-orin-64gb", Description: "NVIDIA Jetson AGX Orin 64GB", Backend: CUDA,
		MemoryBytes: 64 * gib, UsableFraction: 0.85, BandwidthBps: 204.8 * gb,
		BF16FLOPS: 42.5 * tb, INT8FLOPS: 85 * tb,
		Link: Unified, GPUsPerNode: 1,
		Source: "NVIDIA Jetson AGX Orin technical brief (204.8 GB/s LPDDR5, 170 sparse INT8 TOPS); FP16 derived ÷4",
	},
	{
		Name: "apple-m3-max", Description: "Apple M3 Max (40-core GPU, 128GB)", Backend: Metal,
		MemoryBytes: 128 * gib, UsableFraction: 0.75, BandwidthBps: 400 * gb,
		BF16FLOPS: 16.4 * tb,
		Link:      Unified, GPUsPerNode: 1,
		Source: "Apple spec (400 GB/s); 16.4 TFLOPS FP32≈FP16 (gguf-parser-go README); ~75 % of RAM GPU-usable (recommendedMaxWorkingSetSize)",
	},
	{
		Name: "apple-m1-max", Description: "Apple M1 Max (32-core GPU, 64GB)", Backend: Metal,
		MemoryBytes: 64 * gib, UsableFraction: 0.75, BandwidthBps: 400 * gb,
		BF16FLOPS: 10.4 * tb,
		Link:      Unified, GPUsPerNode: 1,
		Source: "Apple spec (400 GB/s); 10.4 TFLOPS FP32 (32-core GPU, FP16 at the same rate); ~75 % of RAM GPU-usable (recommendedMaxWorkingSetSize)",
	},
	{
		Name: "apple-m2-ultra", Description: "Apple M2 Ultra (76-core GPU, 192GB)", Backend: Metal,
		MemoryBytes: 192 * gib, UsableFraction: 0.75, BandwidthBps: 800 * gb,
		BF16FLOPS: 27.2 * tb,
		Link:      Unified, GPUsPerNode: 1,
		Source: "Apple spec (800 GB/s); 27.2 TFLOPS FP32 (76-core GPU, FP16 at the same rate); ~75 % of RAM GPU-usable",
	},
	{
		Name: "apple-m4-max", Description: "Apple M4 Max (40-core GPU, 128GB)", Backend: Metal,
		MemoryBytes: 128 * gib, UsableFraction: 0.75, BandwidthBps: 546 * gb,
		BF16FLOPS: 18.4 * tb,
		Link:      Unified, GPUsPerNode: 1,
		Source: "Apple / notebookcheck via macmegasite (546 GB/s, ~18.4 TFLOPS FP32); HF hardware.ts",
	},
	{
		// The development VM the native engine runs on: 2 vCPU Intel Xeon, 24 GiB.
		// 2 cores × 32 FP32 FLOP/cycle (2 AVX2 FMA ports) × ~2.5 GHz; bandwidth is a
		// nominal share of a DDR4 socket. Nominal, not measured.
		Name: "cpu-local", Description: "CPU (2 vCPU Xeon VM, native engine)", Backend: CPU,
		MemoryBytes: 24 * gib, UsableFraction: 0.8, BandwidthBps: 12 * gb,
		BF16FLOPS: 0.16 * tb,
		Link:      Unified, GPUsPerNode: 1,
		Source: "nominal: 2 cores × 32 FLOP/cycle × 2.5 GHz; ~12 GB/s memory share (not measured)",
	},
}
