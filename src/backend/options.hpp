#pragma once
// The backends' environment switches: each forces one of the paths the library otherwise picks
// itself, so a test can run every path and a benchmark can compare them on one binary. They are
// read from the environment once, here (src/backend/options.cpp is the only library file that
// calls getenv); a value outside the list below is an Error naming the variable and what it takes.
// Unset, empty or "auto": the library's choice.
//
// | variable            | type | values                     | default                        |
// |---------------------|------|----------------------------|--------------------------------|
// | WICK_DECODE_ATTN    | enum | auto, runs, stream         | auto                           |
// | WICK_DECODE_MERGE   | enum | auto, all                  | auto                           |
// | WICK_DECODE_ONE_RUN | int  | auto, keys >= 0            | auto: 256 keys                 |
// | WICK_DECODE_STAGES  | enum | auto, 0                    | auto: the cp.async ring        |
// | WICK_FLASH_WGMMA    | enum | auto, 0, 2p, 2s, 3p, 3s    | auto: 2p                       |
// | WICK_QMV_STAGED     | enum | auto, 0                    | auto: the staged kernel        |
// | WICK_QMV_NORM_BLOCK | int  | auto, 128, 256, 512        | auto: 512 (AMD 256)            |
// | WICK_CPU_ISA        | enum | auto, scalar, avx2, avx512 | auto: the best the CPU has     |
// | WICK_QMATMUL_PATH   | enum | auto, rows, sgemm          | auto: panel kernels, else rows |
// | OMP_NUM_THREADS     | int  | threads >= 1               | the CPUs of the affinity mask  |
//
// What each forces, and who sets it:
// - WICK_DECODE_ATTN: decode attention on the runs kernel (one block per run of keys) or the
//   streaming kernel at every row count; neither takes the tensor-core kernel. ctest
//   gpu_attention_decode_{runs,stream,one_run,registers}; bench/gpu_attention_decode.
// - WICK_DECODE_MERGE=all: the merge kernel finishes every row, also those whose keys fit one run.
//   ctest gpu_attention_decode_merge_all.
// - WICK_DECODE_ONE_RUN: cache views of at most this many keys take the streaming kernel as one run
//   per row group, with no merge kernel (0: never). ctest gpu_attention_decode_one_run (1000000).
// - WICK_DECODE_STAGES=0: the streaming kernel loads into registers on NVIDIA too, as on AMD.
//   ctest gpu_attention_decode_registers.
// - WICK_FLASH_WGMMA: the Hopper flash attention kernel's warpgroups (2 or 3) and whether a group
//   issues the next tile's scores before this tile's P V (p) or not (s); 0 is the mma.sync kernel.
//   bench/vs_torch.py --op attention, wick check --op attention.
// - WICK_QMV_STAGED=0: one-row Q4_0 / Q8_0 products, and the norm inside them, on the unstaged
//   kernel. ctest gpu_qmatmul_unstaged; bench/gpu_qmatvec.
// - WICK_QMV_NORM_BLOCK: threads a block of the staged kernel that normalises its row of x.
//   ctest gpu_qmatmul_norm_128.
// - WICK_CPU_ISA: the CPU quantized matmul's kernel level, capped at what the CPU has: another
//   CPU's kernels on this one. Tests and bench/cpu_qmatvec set levels with qdot::set_isa.
// - WICK_QMATMUL_PATH: the CPU quantized matmul of more than 8 rows on the row kernels where a
//   panel kernel exists (rows) or on dequantize + f32 sgemm (sgemm). tests/test_qmatmul_cpu and
//   bench/cpu_qmatvec (through set_options).
#include <cstddef>
#include <cstdint>
#include <functional>

namespace wick::backend {

enum class DecodeAttn { Auto, Runs, Stream };
enum class FlashWgmma { Auto, Off, G2Pipe, G2Serial, G3Pipe, G3Serial };
enum class CpuIsa { Auto, Scalar, Avx2, Avx512 };
enum class QMatmulPath { Auto, Rows, Sgemm };

struct Options {
  DecodeAttn decode_attn = DecodeAttn::Auto;     // WICK_DECODE_ATTN
  bool decode_merge_all = false;                 // WICK_DECODE_MERGE=all
  int64_t decode_one_run_keys = -1;              // WICK_DECODE_ONE_RUN; -1: tune::kAttnDecodeOneRunKeys
  bool decode_registers = false;                 // WICK_DECODE_STAGES=0
  FlashWgmma flash_wgmma = FlashWgmma::Auto;     // WICK_FLASH_WGMMA
  bool qmv_unstaged = false;                     // WICK_QMV_STAGED=0
  int qmv_norm_block = 0;                        // WICK_QMV_NORM_BLOCK; 0: tune::kQmvStagedNormBlock
  CpuIsa cpu_isa = CpuIsa::Auto;                 // WICK_CPU_ISA
  QMatmulPath qmatmul_path = QMatmulPath::Auto;  // WICK_QMATMUL_PATH
  size_t cpu_threads = 0;                        // OMP_NUM_THREADS; 0: the CPUs of the affinity mask
};

// The variable's value, or nullptr where it is unset.
using EnvLookup = std::function<const char*(const char* name)>;

// The options the variables of the table above ask for; Error(Argument) for a value it does not
// list, naming the variable and the values it takes.
Options parse_options(const EnvLookup& lookup);

// This process's options: parsed from the environment on first use (a bad value throws, on this
// call and the next), or those set_options gave. Ops call it on every launch, so after the first
// parse it is one atomic load, with no lock and no copy. The reference stays valid for the life of
// the process and always shows the set it was taken from.
const Options& options();

// Replaces this process's options: tests and benchmarks force each path. It publishes a new
// snapshot and keeps the old ones (a few a process), so ops already running on other threads may
// see either set, and a reference taken before still reads the old one.
void set_options(const Options& o);

}  // namespace wick::backend
