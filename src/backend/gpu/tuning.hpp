#pragma once
// Every tuning constant of the GPU kernels, in one place, per vendor. The NVIDIA values were
// chosen for Hopper; where one was measured, its comment gives the device (H100 or H200), the
// bench command and the numbers; the others are first choices. The AMD values are not measured
// (no AMD GPU is reachable): they follow AMD's published guidance (64-lane wavefronts on CDNA, 32 on RDNA,
// 64 KiB of LDS per workgroup, 256-thread workgroups as the default) and keep every block a
// multiple of 64 threads so both wave widths fill whole wavefronts.
// Decode speeds (tg128, t/s) are `wick bench-llm FILE -p 0 -n 128 -r 3` on the 1.1B and 7B model
// files of bench/llm_vs_llamacpp.sh; "@ d8192" adds `-d 8192`.

namespace wick::gpu::tune {

// The AMD values also serve the AMD emulation on NVIDIA (-DWICK_GPU_EMULATE, docs/gpu.md).
#if defined(WICK_GPU_HIP) || defined(WICK_EMULATE_AMD)
inline constexpr bool kAmd = true;
#else
inline constexpr bool kAmd = false;
#endif

// Default block for element-wise and copy kernels.
inline constexpr int kBlock = 256;

// Row ops of kernels/nn.cu (softmax_last_dim, rms_norm / layer_norm). Unmeasured first
// choices, the same for both vendors: rows up to kNnSmallRowCols go to groups of <= 32 threads
// (several rows per block, shuffle-only reductions); longer rows get a block each, sized so that
// each thread holds about kNnRowElems elements in registers (>= 2 16-byte loads in flight).
inline constexpr int kNnSmallRowCols = 1024;  // a 32-thread group x 32 registers covers it
inline constexpr int kNnSmallElems = 8;       // per-thread target that sets a short row's group size
inline constexpr int kNnSmallBlock = 256;     // threads per block of grouped short rows
inline constexpr int kNnRowElems = 16;        // per-thread target for a long row
inline constexpr int kNnMinRowBlock = 128;    // a long row's block: multiple of 64, >= 2 wave64
// Also the block of rows too long for registers. AMD: 512 (8 wave64): the cdna emulation gives each
// 64-lane wave of a block one of the 15 named barriers an NVIDIA block has (device_utils.cuh).
inline constexpr int kNnMaxRowBlock = kAmd ? 512 : 1024;
inline constexpr int kNnMaxGrid = 65535 * 8;
// softmax rows of this many columns or more take the two-pass online kernel (a block per row,
// few registers, two blocks per SM) instead of holding the row in registers. NVIDIA: chosen
// from the H200 run where a 32000-column f16 row in registers reached 56% of copy bandwidth.
inline constexpr int kNnOnlineCols = 16384;  // grid-stride loops cover more rows
// rope: pairs per thread-block (one pair per thread, grid-stride).
inline constexpr int kNnRopeBlock = 256;

// attention (kernels/attention.cu): queries per chunk, the cap on a chunk's score buffer
// (f32 scores of every batch and head), threads per softmax row. Unmeasured first choices.
inline constexpr int kAttnRows = 512;
inline constexpr long long kAttnScoreBytes = 256ll << 20;
inline constexpr int kAttnRowBlock = 256;  // multiple of 64
// Decode attention (kernels/attention_decode.cu: up to kAttnDecodeRows query rows per KV head, the
// keys split over blocks): keys per block, one per thread in the score pass. First choice, measured
// only as a whole on an H100 (wick bench-llm tg128 @ d8192): 8192 keys of a 4-KV-head model make 128
// blocks.
inline constexpr int kAttnDecodeKeys = 256;
inline constexpr int kAttnDecodeRows = 8;
inline constexpr int kAttnDecodeMaxDim = 256;
inline constexpr int kAttnDecodeLoads = 8;    // global loads each thread has in flight (first choice)
inline constexpr int kAttnDecodePvLoads = 4;  // the same in the P V pass (16-byte value vectors)
// Query rows per KV head up to which P V reads values in 16-byte vectors (more rows: one value per
// thread). H100: 1 row (7B shape) 16-byte vectors gave tg128 @ d8192 +7% (F16) / +10% (Q4_0) and
// tg128 flat; 8 rows (1.1B shape) -4.5% at tg128, flat at d8192. 2 to 7 rows unmeasured.
inline constexpr int kAttnDecodePvVecRows = 4;
// The streaming decode kernel (decode_stream_kernel): threads per block (a multiple of 64); query
// rows per KV head that take it at every cache length (more rows take it past one run); rows one
// block takes (more rows per KV head split into groups of this many, each reading the keys: on the
// H200 the 1.1B shape's 8 rows at 8,192 keys took 17.2 us in groups of 2 against 20.9 in groups of 4,
// whose 4 rows' registers left 3 blocks per SM); keys each lane loads per step; and steps of loads
// in flight through a shared-memory ring (cp.async, NVIDIA sm_80+; AMD and older NVIDIA load into
// registers). H200 sweep of stages x keys (bench/gpu_attention_decode, us per call): 3 x 4 took the
// 7B shape at 8,192 keys from 52.2 to 42.9 us and the 1.1B shape from 26.1 to 17.2.
inline constexpr int kAttnDecodeStreamBlock = 128;
inline constexpr int kAttnDecodeStreamRows = 4;
inline constexpr int kAttnDecodeStreamGroup = 2;
inline constexpr int kAttnDecodeStreamKeys = 4;
inline constexpr int kAttnDecodeStreamStages = 3;
// Runs per row from which the merge splits them over its block's threads (decode_merge_wide_kernel)
// instead of one thread walking every run of a column. H200, tg128 @ d8192 on the runs kernel: 1.1B
// Q4_0 +2-5%, 1.1B F16 +3.5%, 7B Q4_0 flat.
inline constexpr int kAttnDecodeWideMergeRuns = 16;
// Its runs are sized on the device to fill the GPU once; never fewer keys than this (a multiple of
// every block's keys per step).
inline constexpr int kAttnDecodeStreamMinRun = 32;
// A cache view of at most this many keys (a recorded step's short view, llm/llama.cpp's kShortView:
// llama-bench's tg128) takes the streaming kernel as one run per row group: its block walks every key
// and writes the output, and no merge kernel is launched. 0: never (Options::decode_one_run_keys,
// WICK_DECODE_ONE_RUN, sets it for the tests). H200, tg128 t/s, without -> with: 7B Q4_0 497.6 /
// 494.5 -> 503.8 / 505.7, 7B F16 244.9 / 244.9 -> 245.4 / 245.3 (the 1.1B shape takes the
// tensor-core kernel and does not move).
inline constexpr int kAttnDecodeOneRunKeys = 256;
// The tensor-core decode kernel (decode_mma_kernel, NVIDIA sm_80+; 5 to 8 query rows per KV head,
// d == dv in {64, 128}): warps per block (each walks its share of a run in tiles of 16 keys), tiles of
// k and v rows in flight per warp (warps and stages: first choice, unmeasured), and the least keys a
// run takes (the runs are sized on the device to fill the GPU once, never shorter than this). H100,
// bench/gpu_attention_decode 1.1B shape, us per layer at 512 / 2,048 / 8,192 keys: 128 keys 8.2 / 9.4 /
// 13.3, 256 keys 10.0 / 10.5 / 12.5, 512 keys 13.3 / 14.3 / 15.3 (the stream and runs kernels: 8.4 /
// 11.0 / 17.6); 128 has the least sum over 2,048 and 8,192 keys.
inline constexpr int kAttnDecodeMmaWarps = 4;
inline constexpr int kAttnDecodeMmaStages = 3;
inline constexpr int kAttnDecodeMmaMinRun = 128;
// Fused flash attention (kernels/attention_flash.cu, NVIDIA sm_80+ only): warps per block, 16-row
// blocks of queries per warp (each K and V fragment feeds that many mma), keys per tile, and the
// blocks per SM the registers are bounded for. H200, f16, 32 heads, d 128 (`bench/vs_torch.py --op
// attention`, TFLOP/s causal 4096 / full 1024): 1 row block x 64 keys 227-241 / 174-242 (1 or 2
// blocks per SM), 2 x 64 263 / 293, 2 x 32 261 / 297 (no spills at 251 registers; taken; 264 /
// 291-298 with one barrier a tile).
inline constexpr int kFlashWarps = 4;
inline constexpr int kFlashRowBlocks = 2;
inline constexpr int kFlashKeys = 32;
inline constexpr int kFlashMinBlocks = 2;
// The Hopper kernel (kernels/attention_flash_wgmma.cu, sm_90a, d 128): warpgroups of 64 query rows
// per block, keys per tile (S is one m64n64 accumulator: 32 floats a thread beside O's 64), and
// whether a group issues S of the next tile before P V of this one (four stages). H200, f16, 32
// heads, `WICK_FLASH_WGMMA=2s|2p|3p python3 bench/vs_torch.py --wick build/wick --op attention`
// (TFLOP/s causal 4096 / full 1024): 2 groups 377 / 338-342, 2 pipelined 402-430 / 356-358 (taken),
// 3 pipelined 409-445 / 277-278. 128-key tiles were within the run-to-run spread of 64.
inline constexpr int kFlashWgmmaGroups = 2;
inline constexpr int kFlashWgmmaKeys = 64;
inline constexpr bool kFlashWgmmaPipe = true;

// Tiled transpose (a copy, cast or binary op whose input is a transposed view): square tiles
// staged in shared memory so both the read and the write coalesce. A tile row is
// kTransposeTileBytes wide (64 f32, 32 f64, 128 f16/u8 after the clamp), padded by 4 bytes
// (one 32-bit bank) against bank conflicts; the largest tile (128 x 130 f16) is 33 KiB, within
// AMD's 64 KiB LDS. Extents below kTransposeMinExtent take the plain strided path. AMD values
// unmeasured (LDS has 32 banks of 4 bytes on gfx9 and RDNA, as NVIDIA's shared memory).
inline constexpr int kTransposeBlock = 256;
inline constexpr int kTransposeTileBytes = 256;
inline constexpr int kTransposeTileMin = 32, kTransposeTileMax = 128;
inline constexpr int kTransposeMinExtent = 8;
constexpr int transpose_tile(int elem_bytes) {
  const int t = kTransposeTileBytes / elem_bytes;
  return t < kTransposeTileMin ? kTransposeTileMin : (t > kTransposeTileMax ? kTransposeTileMax : t);
}

// Reductions. Blocks of kReduceBlock threads; a grid of at least kReduceBlocksPerSm blocks
// per SM (CU) before the reduced range is split over blocks (deterministic second pass).
// Row reductions give each thread about kReduceRowVecs 16-byte vectors of a row; column
// reductions give each thread at least kReduceColRows rows, kReduceColThreadsX threads across
// the columns of a block (16-byte vectors each: 512 contiguous bytes per row). Loads are
// unrolled kReduceUnroll deep so several are in flight per thread. AMD: 256-thread workgroups
// are four wave64 (eight wave32); CDNA runs up to 2560 threads per CU (unmeasured).
inline constexpr int kReduceBlock = 256;
inline constexpr int kReduceBlocksPerSm = 8;  // the same for both vendors (unmeasured on AMD)
inline constexpr int kReduceRowVecs = 4;
inline constexpr int kReduceColThreadsX = 32;
inline constexpr int kReduceColRows = 8;
inline constexpr int kReduceUnroll = 4;
inline constexpr int kReduceWaves = 4;  // waves of blocks a split reduction aims for (evens out the tail)
inline constexpr int kReduceSmemBytes = 32 * 1024;  // per-block accumulators of a column reduction

// Quantized blocks (kernels/quant.cu: dequantize, embedding, activation quantize). A block of
// kQuantBlock threads decodes kQuantStageElems elements per round, one GGUF block per thread,
// into an f32 stage in shared memory (32 KiB + padding, plus the staged raw bytes: < 48 KiB),
// then writes the round out coalesced. Unmeasured first choices, the same for both vendors.
inline constexpr int kQuantBlock = 256;
inline constexpr int kQuantStageElems = 8192;
// Prefill product (many rows x a quantized W): W is dequantized to f16/bf16 in chunks of rows
// of at most this many bytes before each vendor GEMM, so a huge LM head never needs a full copy.
inline constexpr long long kQuantPrefillScratchBytes = 256ll << 20;

// f16/bf16 matrix-vector (kernels/matmul.cu, x.matmul(w.t()) with up to kMvMaxRows rows of x):
// kMvBlock threads stride over kMvRows weight rows per block in 16-byte vectors, kMvUnroll vectors
// of each row in flight per thread. bench/gpu_matvec's sweep over the 1.1B/7B decode shapes (H100,
// 2026-11-25, mean % of copy bandwidth): 1 row x 128 threads 81.1% f16 / 80.0% bf16, the best of
// 1/2/4 rows x 64/128/256 threads; 2 rows x 128 (the first choice) 80.0% / 68.3%. Unmeasured on AMD.
inline constexpr int kMvMaxRows = 8;
inline constexpr int kMvBlock = 128;
inline constexpr int kMvMaxBlock = 256;  // the largest block the benchmark's sweep launches (launch bounds)
inline constexpr int kMvRows = 1;
inline constexpr int kMvUnroll = 4;
// One f16 row of x whose rows leave the last round of a thread's kMvUnroll 16-byte loads at most
// half full (k = 2048 and 5632 of the 1.1B shape): kMvHalfRoundRows rows per block of
// kMvHalfRoundBlock threads, whose second row fills that round. H200 sweep (bench/gpu_matvec): 1.1B
// o 4.33 us vs 5.18 with R = 1, gate/up 15.4 vs 17.3, down 8.66 vs 9.81, head 35.9 vs
// 44.1; the 7B shapes (k = 4096: one full round; 11008: the last 3/4 full) were best with R = 1,
// and bf16 was not faster with R = 2.
inline constexpr int kMvHalfRoundRows = 2;
inline constexpr int kMvHalfRoundBlock = 128;
// matmul_swiglu (the silu product in the matrix-vector epilogue: a gate row and its up row per
// block) runs only where the plain product takes kMvHalfRoundRows = 2 rows anyway; elsewhere the
// pair cost more than the silu_mul kernel it saves. H200, tg128 t/s: 1.1B F16
// fused 2 x 64 threads 830.6, 2 x 128 819, 4 x 128 789, unfused 805-815; 7B F16 (k = 4096, one row
// per block unfused) fused 2 x 64 228.9, 2 x 128 228, 4 x 128 220, unfused 242.
inline constexpr int kMvSwigluBlock = 64;

// Quantized matrix-vector (kernels/qmatmul.cu, 1..kQmvMaxRows rows of x): kQmvBlock threads per
// block (a multiple of 64: 4 warps, 2 wave64), kQmvRows weight rows per block sharing each
// activation load, each thread taking kQmvUnroll chunks per round so several weight loads are in
// flight. x rows are padded to 1, 2, 4 or 8 (fewer kernels; a padded row is zeros). NVIDIA: on an
// H100, one row of x, 2 rows x 128 threads had the best mean of 1/2/4/8 rows x 64/128/256 threads
// over the 20 cases of bench/gpu_qmatvec (50.7% of copy bandwidth; the others 38-50%). AMD
// unmeasured.
inline constexpr int kQmvMaxRows = 8;
inline constexpr int kQmvBlock = 128;
inline constexpr int kQmvMaxBlock = 256;  // the kernels' launch bound (the bench tries 64..256)
inline constexpr int kQmvRows = 2;   // 2..8 rows of x
inline constexpr int kQmvRows1 = 2;  // one row of x (1, 2, 4 or 8)
inline constexpr int kQmvUnroll = 2;
// One row of x: choices by type and shape where the sweep (bench/gpu_qmatvec on an H200) and the
// decode speed (tg128 against the kQmvRows1 x kQmvBlock default) agreed:
// - Q4_K rows of at least kQmvQ4KLongK elements (the 7B shapes): kQmvQ4KLongRows rows of 128
//   threads (11008 x 4096: 11.6 us vs 13.2 with 2 rows; 7B Q4_K tg128 451 vs 426 t/s); at k = 2048
//   the 1.1B products with few rows were slower that way (2048 x 2048: 4.87 vs 4.57 us);
// - rows of at most kQmvShortK elements, at least kQmvManyRows of them (the 1.1B gate/up, 2048 x
//   11264): Q4_0 kQmvShortQ40Rows rows of kQmvShortQ40Block threads (8.55 vs 9.42 us; 1.1B Q4_0
//   tg128 +2.7%), Q4_K kQmvShortQ4KRows of kQmvShortQ4KBlock (8.18 vs 9.51 us; 1.1B Q4_K +2-3%);
//   Q8_0 was not faster that way;
// - Q4_0 / Q8_0 rows of at least kQmvLongK elements (the 7B down product): kQmvLongKRows rows of
//   kQmvLongKBlock threads (7B tg128 +1.1% Q4_0, +1.4% Q8_0); Q4_K's and Q6_K's were slower that way.
inline constexpr int kQmvQ4KLongK = 4096;
inline constexpr int kQmvQ4KLongRows = 4;
inline constexpr int kQmvShortK = 2048;
inline constexpr int kQmvManyRows = 8192;
inline constexpr int kQmvShortQ40Rows = 8;
inline constexpr int kQmvShortQ40Block = 128;
inline constexpr int kQmvShortQ4KRows = 4;
inline constexpr int kQmvShortQ4KBlock = 64;
inline constexpr int kQmvLongK = 8192;
inline constexpr int kQmvLongKRows = 2;
inline constexpr int kQmvLongKBlock = 256;
inline constexpr int kQmvQuantBlock = 256;  // activation quantization: 8 Q8_1 blocks (32 lanes each)
// The staged kernel (one row of x, Q4_0 / Q8_0 rows of whole 8-block groups): blocks of
// kQmvStagedBlock threads, each warp copying a row in up to kQmvStagedLoads 16-byte loads per lane
// (a row of at most 8192 Q4_0 / 4096 Q8_0 elements on 32-lane warps) to shared memory. Taken for
// k >= kQmvStagedMinK and n >= kQmvStagedMinRows: on an H200 it beat qmv_kernel on 4096 x 11008 and
// 4096 x 32000 (Q4_0 10.9 / 22.4 us vs 12.0 / 27.0, Q8_0 16.2 / 36.5 vs 17.3 / 40.5) and lost on
// 4096 x 4096 Q4_0 (7.8 vs 6.7 us: one wave of blocks, fewer rows than warps to walk them) and on
// the 1.1B shapes (k = 2048: the 1.1B Q4_0 / Q8_0 files 5% slower at tg128 with every product
// staged). AMD unmeasured.
inline constexpr int kQmvStagedBlock = 128;
inline constexpr int kQmvStagedLoads = 9;
inline constexpr int kQmvStagedMinK = 4096;
inline constexpr int kQmvStagedMinRows = 8192;
// The staged kernel normalising its row of x itself (qmatvec_normed): at most this many 16-byte
// chunks of x a thread (k = 8192 f16 or 4096 f32 at 128 threads), held in registers with the
// norm's weight across the block's reduction.
inline constexpr int kQmvStagedNormChunks = 8;
// Its threads per block (a multiple of 64; more threads, fewer blocks, each reading the row and the
// norm's weight once), and the launch bound that covers every choice of Options::qmv_norm_block
// (WICK_QMV_NORM_BLOCK). H200, 7B Q4_0 / Q8_0 tg128 t/s, a norm kernel before the product vs the
// norm inside it at 128 / 256 / 512 threads, two rounds:
// Q4_0 496-506 vs 486 / 526 / 540, Q8_0 360-363 vs 362 / 370-375 / 376-380 (at 128 threads five
// blocks an SM each read the 24 KB of x, residual and weight from L2; at 512 one block does). AMD
// unmeasured: 256, whose 42 KB of LDS fit the 64 KB a workgroup has (512 threads need 79 KB).
inline constexpr int kQmvStagedNormBlock = kAmd ? 256 : 512;
inline constexpr int kQmvStagedNormMaxBlock = 512;

}  // namespace wick::gpu::tune
