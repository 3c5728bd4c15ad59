#include "textflag.h"

// func Kernel6x16(kk int, a, b, out *float32)
// out[r*16+c] = Σ_p a[p*6+r]·b[p*16+c] for r < 6, c < 16, with twelve YMM
// accumulators: per step two 8-wide loads of B, six broadcasts of A, twelve
// fused multiply-adds.
TEXT ·Kernel6x16(SB), NOSPLIT, $0-32
	MOVQ kk+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ out+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

loop:
	TESTQ CX, CX
	JE    done
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS 4(SI), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS 8(SI), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS 12(SI), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS 16(SI), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS 20(SI), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JMP  loop

done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VMOVUPS Y8, 256(DX)
	VMOVUPS Y9, 288(DX)
	VMOVUPS Y10, 320(DX)
	VMOVUPS Y11, 352(DX)
	VZEROUPPER
	RET

// func Kernel6x16Acc(kk int, a, b, c *float32, ldc int, alpha float32)
// Like Kernel6x16, then C[r*ldc+c] += alpha·acc[r][c] for the full 6×16 block.
TEXT ·Kernel6x16Acc(SB), NOSPLIT, $0-44
	MOVQ kk+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

accloop:
	TESTQ CX, CX
	JE    accdone
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS 4(SI), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS 8(SI), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS 12(SI), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS 16(SI), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS 20(SI), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JMP  accloop

accdone:
	VBROADCASTSS alpha+40(FP), Y15
	VMOVUPS     (DX), Y12
	VMOVUPS     32(DX), Y13
	VFMADD231PS Y0, Y15, Y12
	VFMADD231PS Y1, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMOVUPS     (DX), Y12
	VMOVUPS     32(DX), Y13
	VFMADD231PS Y2, Y15, Y12
	VFMADD231PS Y3, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMOVUPS     (DX), Y12
	VMOVUPS     32(DX), Y13
	VFMADD231PS Y4, Y15, Y12
	VFMADD231PS Y5, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMOVUPS     (DX), Y12
	VMOVUPS     32(DX), Y13
	VFMADD231PS Y6, Y15, Y12
	VFMADD231PS Y7, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMOVUPS     (DX), Y12
	VMOVUPS     32(DX), Y13
	VFMADD231PS Y8, Y15, Y12
	VFMADD231PS Y9, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMOVUPS     (DX), Y12
	VMOVUPS     32(DX), Y13
	VFMADD231PS Y10, Y15, Y12
	VFMADD231PS Y11, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	VZEROUPPER
	RET

// func Kernel6x16Store(kk int, a, b, c *float32, ldc int, alpha float32)
// Like Kernel6x16, then C[r*ldc+c] = alpha·acc[r][c] for the full 6×16 block.
TEXT ·Kernel6x16Store(SB), NOSPLIT, $0-44
	MOVQ kk+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

stloop:
	TESTQ CX, CX
	JE    stdone
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS 4(SI), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS 8(SI), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS 12(SI), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS 16(SI), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS 20(SI), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JMP  stloop

stdone:
	VBROADCASTSS alpha+40(FP), Y15
	VMULPS      Y0, Y15, Y12
	VMULPS      Y1, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMULPS      Y2, Y15, Y12
	VMULPS      Y3, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMULPS      Y4, Y15, Y12
	VMULPS      Y5, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMULPS      Y6, Y15, Y12
	VMULPS      Y7, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMULPS      Y8, Y15, Y12
	VMULPS      Y9, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	ADDQ        R8, DX
	VMULPS      Y10, Y15, Y12
	VMULPS      Y11, Y15, Y13
	VMOVUPS     Y12, (DX)
	VMOVUPS     Y13, 32(DX)
	VZEROUPPER
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func Dot(x, y *float32, n int) float32
// Σ x[i]·y[i] over the first n − n%8 elements (callers add the tail).
TEXT ·Dot(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ        CX, $32
	JLT         dot8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         dot32

dot8:
	CMPQ        CX, $8
	JLT         dotsum
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         dot8

dotsum:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func Axpy(alpha float32, x, y *float32, n int)
// y[i] += alpha·x[i] over the first n − n%8 elements (callers do the tail).
TEXT ·Axpy(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Y0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX

axpy32:
	CMPQ        CX, $32
	JLT         axpy8
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         axpy32

axpy8:
	CMPQ        CX, $8
	JLT         axpydone
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         axpy8

axpydone:
	VZEROUPPER
	RET

// Constants of ExpSum, eight copies each (32 bytes) for full-width memory operands:
// log2e = 1.4426950408889634
DATA expc<>+0(SB)/4, $0x3fb8aa3b
DATA expc<>+4(SB)/4, $0x3fb8aa3b
DATA expc<>+8(SB)/4, $0x3fb8aa3b
DATA expc<>+12(SB)/4, $0x3fb8aa3b
DATA expc<>+16(SB)/4, $0x3fb8aa3b
DATA expc<>+20(SB)/4, $0x3fb8aa3b
DATA expc<>+24(SB)/4, $0x3fb8aa3b
DATA expc<>+28(SB)/4, $0x3fb8aa3b
// half = 0.5
DATA expc<>+32(SB)/4, $0x3f000000
DATA expc<>+36(SB)/4, $0x3f000000
DATA expc<>+40(SB)/4, $0x3f000000
DATA expc<>+44(SB)/4, $0x3f000000
DATA expc<>+48(SB)/4, $0x3f000000
DATA expc<>+52(SB)/4, $0x3f000000
DATA expc<>+56(SB)/4, $0x3f000000
DATA expc<>+60(SB)/4, $0x3f000000
// c1 = 0.693359375
DATA expc<>+64(SB)/4, $0x3f318000
DATA expc<>+68(SB)/4, $0x3f318000
DATA expc<>+72(SB)/4, $0x3f318000
DATA expc<>+76(SB)/4, $0x3f318000
DATA expc<>+80(SB)/4, $0x3f318000
DATA expc<>+84(SB)/4, $0x3f318000
DATA expc<>+88(SB)/4, $0x3f318000
DATA expc<>+92(SB)/4, $0x3f318000
// c2 = -0.00021219444
DATA expc<>+96(SB)/4, $0xb95e8083
DATA expc<>+100(SB)/4, $0xb95e8083
DATA expc<>+104(SB)/4, $0xb95e8083
DATA expc<>+108(SB)/4, $0xb95e8083
DATA expc<>+112(SB)/4, $0xb95e8083
DATA expc<>+116(SB)/4, $0xb95e8083
DATA expc<>+120(SB)/4, $0xb95e8083
DATA expc<>+124(SB)/4, $0xb95e8083
// hi = 88.3762626647949
DATA expc<>+128(SB)/4, $0x42b0c0a5
DATA expc<>+132(SB)/4, $0x42b0c0a5
DATA expc<>+136(SB)/4, $0x42b0c0a5
DATA expc<>+140(SB)/4, $0x42b0c0a5
DATA expc<>+144(SB)/4, $0x42b0c0a5
DATA expc<>+148(SB)/4, $0x42b0c0a5
DATA expc<>+152(SB)/4, $0x42b0c0a5
DATA expc<>+156(SB)/4, $0x42b0c0a5
// lo = -87.3365402
DATA expc<>+160(SB)/4, $0xc2aeac4f
DATA expc<>+164(SB)/4, $0xc2aeac4f
DATA expc<>+168(SB)/4, $0xc2aeac4f
DATA expc<>+172(SB)/4, $0xc2aeac4f
DATA expc<>+176(SB)/4, $0xc2aeac4f
DATA expc<>+180(SB)/4, $0xc2aeac4f
DATA expc<>+184(SB)/4, $0xc2aeac4f
DATA expc<>+188(SB)/4, $0xc2aeac4f
// p0 = 0.000198756915
DATA expc<>+192(SB)/4, $0x39506967
DATA expc<>+196(SB)/4, $0x39506967
DATA expc<>+200(SB)/4, $0x39506967
DATA expc<>+204(SB)/4, $0x39506967
DATA expc<>+208(SB)/4, $0x39506967
DATA expc<>+212(SB)/4, $0x39506967
DATA expc<>+216(SB)/4, $0x39506967
DATA expc<>+220(SB)/4, $0x39506967
// p1 = 0.0013981999507
DATA expc<>+224(SB)/4, $0x3ab743ce
DATA expc<>+228(SB)/4, $0x3ab743ce
DATA expc<>+232(SB)/4, $0x3ab743ce
DATA expc<>+236(SB)/4, $0x3ab743ce
DATA expc<>+240(SB)/4, $0x3ab743ce
DATA expc<>+244(SB)/4, $0x3ab743ce
DATA expc<>+248(SB)/4, $0x3ab743ce
DATA expc<>+252(SB)/4, $0x3ab743ce
// p2 = 0.0083334519073
DATA expc<>+256(SB)/4, $0x3c088908
DATA expc<>+260(SB)/4, $0x3c088908
DATA expc<>+264(SB)/4, $0x3c088908
DATA expc<>+268(SB)/4, $0x3c088908
DATA expc<>+272(SB)/4, $0x3c088908
DATA expc<>+276(SB)/4, $0x3c088908
DATA expc<>+280(SB)/4, $0x3c088908
DATA expc<>+284(SB)/4, $0x3c088908
// p3 = 0.041665795894
DATA expc<>+288(SB)/4, $0x3d2aa9c1
DATA expc<>+292(SB)/4, $0x3d2aa9c1
DATA expc<>+296(SB)/4, $0x3d2aa9c1
DATA expc<>+300(SB)/4, $0x3d2aa9c1
DATA expc<>+304(SB)/4, $0x3d2aa9c1
DATA expc<>+308(SB)/4, $0x3d2aa9c1
DATA expc<>+312(SB)/4, $0x3d2aa9c1
DATA expc<>+316(SB)/4, $0x3d2aa9c1
// p4 = 0.16666665459
DATA expc<>+320(SB)/4, $0x3e2aaaaa
DATA expc<>+324(SB)/4, $0x3e2aaaaa
DATA expc<>+328(SB)/4, $0x3e2aaaaa
DATA expc<>+332(SB)/4, $0x3e2aaaaa
DATA expc<>+336(SB)/4, $0x3e2aaaaa
DATA expc<>+340(SB)/4, $0x3e2aaaaa
DATA expc<>+344(SB)/4, $0x3e2aaaaa
DATA expc<>+348(SB)/4, $0x3e2aaaaa
// p5 = 0.50000001201
DATA expc<>+352(SB)/4, $0x3f000000
DATA expc<>+356(SB)/4, $0x3f000000
DATA expc<>+360(SB)/4, $0x3f000000
DATA expc<>+364(SB)/4, $0x3f000000
DATA expc<>+368(SB)/4, $0x3f000000
DATA expc<>+372(SB)/4, $0x3f000000
DATA expc<>+376(SB)/4, $0x3f000000
DATA expc<>+380(SB)/4, $0x3f000000
// one = 1.0
DATA expc<>+384(SB)/4, $0x3f800000
DATA expc<>+388(SB)/4, $0x3f800000
DATA expc<>+392(SB)/4, $0x3f800000
DATA expc<>+396(SB)/4, $0x3f800000
DATA expc<>+400(SB)/4, $0x3f800000
DATA expc<>+404(SB)/4, $0x3f800000
DATA expc<>+408(SB)/4, $0x3f800000
DATA expc<>+412(SB)/4, $0x3f800000
// 127, the float32 exponent bias (int32)
DATA expc<>+416(SB)/4, $0x0000007f
DATA expc<>+420(SB)/4, $0x0000007f
DATA expc<>+424(SB)/4, $0x0000007f
DATA expc<>+428(SB)/4, $0x0000007f
DATA expc<>+432(SB)/4, $0x0000007f
DATA expc<>+436(SB)/4, $0x0000007f
DATA expc<>+440(SB)/4, $0x0000007f
DATA expc<>+444(SB)/4, $0x0000007f
GLOBL expc<>(SB), RODATA|NOPTR, $448

// func ExpSum(x *float32, n int, shift float32) float32
// Sets x[i] = exp(x[i] − shift) for the first n − n%8 elements and returns
// their sum (callers do the tail). Cephes expf: clamp to [−87.34, 88.38],
// n = floor(x·log2e + 0.5), r = x − n·ln2 (two-part), degree-6 polynomial,
// times 2^n built in the exponent field. Relative error < 2e-7.
TEXT ·ExpSum(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS shift+16(FP), Y15
	VXORPS       Y0, Y0, Y0

exploop:
	CMPQ         CX, $8
	JLT          expsum
	VMOVUPS      (SI), Y1
	VSUBPS       Y15, Y1, Y1
	VMINPS       expc<>+128(SB), Y1, Y1
	VMAXPS       expc<>+160(SB), Y1, Y1
	VMOVUPS      expc<>+32(SB), Y2
	VFMADD231PS  expc<>+0(SB), Y1, Y2
	VROUNDPS     $1, Y2, Y2
	VFNMADD231PS expc<>+64(SB), Y2, Y1
	VFNMADD231PS expc<>+96(SB), Y2, Y1
	VMULPS       Y1, Y1, Y3
	VMOVUPS      expc<>+192(SB), Y4
	VFMADD213PS  expc<>+224(SB), Y1, Y4
	VFMADD213PS  expc<>+256(SB), Y1, Y4
	VFMADD213PS  expc<>+288(SB), Y1, Y4
	VFMADD213PS  expc<>+320(SB), Y1, Y4
	VFMADD213PS  expc<>+352(SB), Y1, Y4
	VFMADD213PS  Y1, Y3, Y4
	VADDPS       expc<>+384(SB), Y4, Y4
	VCVTPS2DQ    Y2, Y5
	VPADDD       expc<>+416(SB), Y5, Y5
	VPSLLD       $23, Y5, Y5
	VMULPS       Y5, Y4, Y4
	VMOVUPS      Y4, (SI)
	VADDPS       Y4, Y0, Y0
	ADDQ         $32, SI
	SUBQ         $8, CX
	JMP          exploop

expsum:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func Dot4(x, b0, b1, b2, b3 *float32, n int, out *float32)
// out[r] = Σ x[i]·br[i] over the first n − n%8 elements, for r = 0..3: one
// load of x serves four rows of B (callers add the tails).
TEXT ·Dot4(SB), NOSPLIT, $0-56
	MOVQ   x+0(FP), SI
	MOVQ   b0+8(FP), R8
	MOVQ   b1+16(FP), R9
	MOVQ   b2+24(FP), R10
	MOVQ   b3+32(FP), R11
	MOVQ   n+40(FP), CX
	MOVQ   out+48(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot4loop:
	CMPQ        CX, $8
	JLT         dot4sum
	VMOVUPS     (SI), Y4
	VFMADD231PS (R8), Y4, Y0
	VFMADD231PS (R9), Y4, Y1
	VFMADD231PS (R10), Y4, Y2
	VFMADD231PS (R11), Y4, Y3
	ADDQ        $32, SI
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11
	SUBQ        $8, CX
	JMP         dot4loop

dot4sum:
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVUPS      X0, (DX)
	VZEROUPPER
	RET

// func Sigmoid(dst, src *float32, n int)
// dst[i] = 1/(1+exp(−src[i])) for the first n − n%8 elements.
TEXT ·Sigmoid(SB), NOSPLIT, $0-24
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    n+16(FP), CX
	VXORPS  Y6, Y6, Y6
	VMOVUPS expc<>+384(SB), Y7

sigloop:
	CMPQ         CX, $8
	JLT          sigdone
	VMOVUPS      (SI), Y0
	VSUBPS       Y0, Y6, Y1
	VMINPS       expc<>+128(SB), Y1, Y1
	VMAXPS       expc<>+160(SB), Y1, Y1
	VMOVUPS      expc<>+32(SB), Y2
	VFMADD231PS  expc<>+0(SB), Y1, Y2
	VROUNDPS     $1, Y2, Y2
	VFNMADD231PS expc<>+64(SB), Y2, Y1
	VFNMADD231PS expc<>+96(SB), Y2, Y1
	VMULPS       Y1, Y1, Y3
	VMOVUPS      expc<>+192(SB), Y4
	VFMADD213PS  expc<>+224(SB), Y1, Y4
	VFMADD213PS  expc<>+256(SB), Y1, Y4
	VFMADD213PS  expc<>+288(SB), Y1, Y4
	VFMADD213PS  expc<>+320(SB), Y1, Y4
	VFMADD213PS  expc<>+352(SB), Y1, Y4
	VFMADD213PS  Y1, Y3, Y4
	VADDPS       expc<>+384(SB), Y4, Y4
	VCVTPS2DQ    Y2, Y5
	VPADDD       expc<>+416(SB), Y5, Y5
	VPSLLD       $23, Y5, Y5
	VMULPS       Y5, Y4, Y4
	VADDPS       Y7, Y4, Y4
	VDIVPS       Y4, Y7, Y4
	VMOVUPS      Y4, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DI
	SUBQ         $8, CX
	JMP          sigloop

sigdone:
	VZEROUPPER
	RET

// func SiLUMul(h, gate, up *float32, n int)
// h[i] = g[i]·u[i]/(1+exp(−g[i])) (SwiGLU) for the first n − n%8 elements.
TEXT ·SiLUMul(SB), NOSPLIT, $0-32
	MOVQ    h+0(FP), DI
	MOVQ    gate+8(FP), SI
	MOVQ    up+16(FP), DX
	MOVQ    n+24(FP), CX
	VXORPS  Y6, Y6, Y6
	VMOVUPS expc<>+384(SB), Y7

siluloop:
	CMPQ         CX, $8
	JLT          siludone
	VMOVUPS      (SI), Y0
	VSUBPS       Y0, Y6, Y1
	VMINPS       expc<>+128(SB), Y1, Y1
	VMAXPS       expc<>+160(SB), Y1, Y1
	VMOVUPS      expc<>+32(SB), Y2
	VFMADD231PS  expc<>+0(SB), Y1, Y2
	VROUNDPS     $1, Y2, Y2
	VFNMADD231PS expc<>+64(SB), Y2, Y1
	VFNMADD231PS expc<>+96(SB), Y2, Y1
	VMULPS       Y1, Y1, Y3
	VMOVUPS      expc<>+192(SB), Y4
	VFMADD213PS  expc<>+224(SB), Y1, Y4
	VFMADD213PS  expc<>+256(SB), Y1, Y4
	VFMADD213PS  expc<>+288(SB), Y1, Y4
	VFMADD213PS  expc<>+320(SB), Y1, Y4
	VFMADD213PS  expc<>+352(SB), Y1, Y4
	VFMADD213PS  Y1, Y3, Y4
	VADDPS       expc<>+384(SB), Y4, Y4
	VCVTPS2DQ    Y2, Y5
	VPADDD       expc<>+416(SB), Y5, Y5
	VPSLLD       $23, Y5, Y5
	VMULPS       Y5, Y4, Y4
	VADDPS       Y7, Y4, Y4
	VMULPS       (DX), Y0, Y0
	VDIVPS       Y4, Y0, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, DI
	SUBQ         $8, CX
	JMP          siluloop

siludone:
	VZEROUPPER
	RET
