// docs/ops.md from the op table (src/ops/op_table.hpp), the dtype list (include/wick/dtype.hpp)
// and the rows below for the ops that are not table rows. tests/test_check.cpp checks that every
// row names its parity cases, that every parity case is in some row, and that docs/ops.md is
// this text.
#include "check/ops_doc.hpp"

#include "ops/op_kinds.hpp"
#include "wick/dtype.hpp"
#include "wick/quant.hpp"

namespace wick::check {
namespace {

const char* class_name(DTypeClass c) { return c == DTypeClass::All ? "all" : "float"; }

template <class Info, class Keep>
std::vector<std::string> names_of(const Info& table, Keep keep) {
  std::vector<std::string> out;
  for (const auto& row : table)
    if (keep(row)) out.push_back(row.name);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string dtype_group(bool (*keep)(DType)) {
  std::vector<std::string> v;
  for (DType d : kAllDTypes)
    if (keep(d)) v.push_back(dtype_name(d));
  return join(v, " ");
}

}  // namespace

std::vector<OpRow> backend_op_rows() {
  std::vector<OpRow> rows = {
      {"fill/copy",
       "const_set (zeros, ones, full, eye), copy_strided_src (contiguous, copy), copy2d (cat, stack)",
       "all",
       {"copy", "contiguous", "cat", "stack"}},
      {"fill/copy",
       "copy_strided_at (slice_set with a start tensor, read on the device and clamped)",
       "all",
       {"slice_set"}},
      {"fill/copy", "to_dtype: all " + std::to_string(kNumDTypes * kNumDTypes) + " casts", "all -> all", {"to_dtype"}},
      {"random", "rand (uniform), randn (normal), same numbers on every backend", "float", {}},
      {"element-wise", "affine", "all", {"affine"}},
      {"element-wise", "powf, elu", "float", {"powf", "elu"}},
  };
  for (DTypeClass c : {DTypeClass::All, DTypeClass::Float}) {
    auto v = names_of(kUnaryOps, [c](const UnaryOpInfo& u) { return u.dtypes == c; });
    rows.push_back({"element-wise", join(v, ", "), class_name(c), v});
  }
  auto all = [](const auto&) { return true; };
  auto bin = names_of(kBinaryOps, all), cmp = names_of(kCmpOps, all);
  rows.push_back({"element-wise", join(bin, ", ") + " (broadcasting; scalar forms)", "all", bin});
  rows.push_back({"element-wise", join(cmp, ", ") + " -> u8", "all", cmp});
  rows.push_back({"element-wise", "where_cond (condition u8/u32/i16/i32/i64)", "all", {"where_cond"}});
  auto same = names_of(kReduceOps, [](const ReduceOpInfo& r) { return r.out == ReduceOut::Same; });
  auto arg = names_of(kReduceOps, [](const ReduceOpInfo& r) { return r.out == ReduceOut::U32; });
  rows.push_back({"reduce", join(same, ", ") + " over any dims (keepdim)", "all", same});
  rows.push_back({"reduce", join(arg, ", ") + " -> u32", "all", arg});
  std::vector<OpRow> rest = {
      {"scan/sort", "cumsum (any dim)", "all", {"cumsum"}},
      {"scan/sort", "arg_sort (last dim, asc/desc, stable, any length) -> u32", "all", {"arg_sort"}},
      {"scan/sort",
       "top_k (last dim, the k largest in arg_sort desc order; values by gather) -> values, u32",
       "all",
       {"top_k"}},
      {"indexing",
       "index_select, gather, scatter, scatter_add, index_add (ids u8/u32/i16/i32/i64)",
       "all",
       {"index_select", "gather", "scatter", "scatter_add", "index_add", "scatter_set", "scatter_add_set"}},
      {"linear algebra",
       "matmul (batched, broadcast batch, transposed operands without copies)",
       "all",
       {"matmul"},
       "run (OpenBLAS f32/f64)",
       "run (cuBLAS f16/bf16/f32/f64; f16/bf16 with <= 8 rows against a transposed rhs: kernels/matmul.cu's "
       "matrix-vector kernel)",
       "compiled (rocBLAS; the same matrix-vector kernel)"},
      {"conv",
       "conv1d, conv2d, conv_transpose1d, conv_transpose2d (stride, padding, dilation, groups, output padding)",
       "all",
       {"conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"}},
      {"pooling", "max_pool2d", "all", {"max_pool2d"}},
      {"pooling", "avg_pool2d", "float", {"avg_pool2d"}},
      {"resampling", "upsample_nearest1d, upsample_nearest2d", "all", {"upsample_nearest1d", "upsample_nearest2d"}},
      {"resampling", "upsample_bilinear2d (align_corners, scale factors)", "float", {"upsample_bilinear2d"}},
      {"nn (fused)",
       "softmax_last_dim, log_softmax_last_dim (f32 accumulation for half types)",
       "float",
       {"softmax_last_dim", "log_softmax_last_dim"},
       "run",
       "run (kernels/nn.cu)"},
      {"nn (fused)",
       "rms_norm (optional weight), layer_norm (optional weight, bias; biased variance), add_rms_norm (the "
       "residual add fused in, both results)",
       "float",
       {"rms_norm", "layer_norm", "add_rms_norm"},
       "run",
       "run (kernels/nn.cu)"},
      {"nn (fused)",
       "rope_i (interleaved), rope (half split), rope_thd ((b, t, h, d)); cos/sin (t, d/2) or (b, t, d/2); "
       "fast::rope_kv_append (rope of stacked q/k heads, the k heads and v written into KV caches at a device-held "
       "row)",
       "float",
       {"rope_i", "rope", "rope_thd", "rope_kv_append"},
       "run",
       "run (kernels/nn.cu)"},
      {"nn (fused)", "silu_mul (broadcasting), swiglu", "float", {"silu_mul", "swiglu"}, "run", "run (kernels/nn.cu)"},
      {"nn (fused)",
       "attention (online softmax, causal bottom-right, grouped-query heads, strided q/k/v)",
       "bf16 f16 f32 f64",
       {"attention"},
       "run",
       "run (kernels/attention_decode.cu for <= 8 query rows per KV head; kernels/attention_flash.cu for f16/bf16 "
       "head dim 64/128 on sm_80+, attention_flash_wgmma.cu for head dim 128 on sm_90; kernels/attention.cu otherwise)",
       "compiled (kernels/attention_decode.cu; kernels/attention.cu: rocBLAS)"},
      {"nn (fused)",
       "fast::paged_attention (a batch's k/v rows written into a paged cache, then each token over its sequence's "
       "keys through a block table; causal, sliding window, grouped-query heads; f16/bf16/f32/f8e4m3 caches)",
       "bf16 f16 f32",
       {"paged_attention"},
       "run",
       "run (kernels/attention_paged.cu)",
       "compiled (as cuda)"},
      {"nn (fused)",
       "attention_kv_len (batch b attends to its first kv_len[b] keys, lengths read on the device and clamped)",
       "bf16 f16 f32 f64",
       {"attention_kv_len"},
       "run",
       "run (kernels/attention_decode.cu reads the lengths for f16/bf16 decode shapes; other shapes read them to the "
       "host and run attention per batch)",
       "compiled (as cuda)"},
      {"quantized",
       "dequantize (QTensor -> f32, f16, bf16), bit for bit the CPU's",
       "bf16 f16 f32 out",
       {"dequantize"},
       "run",
       "run (kernels/quant.cu)"},
      {"quantized",
       "embedding rows of a quantized table (ids u8/u32/i16/i32/i64)",
       "bf16 f16 f32 out",
       {"qembedding"},
       "run",
       "run (kernels/quant.cu)"},
      {"quantized",
       "qmatmul y = x @ W^T: decode (m <= 8, x quantized to Q8_*, integer dots) and prefill (m > 8)",
       "x bf16 f16 f32",
       {"qmatmul"},
       "run",
       "run (kernels/qmatmul.cu; prefill kernels/quant.cu)"},
      {"quantized",
       "fast::add_rms_norm_matmul_t: add_rms_norm then qmatmul, {x + r, rms_norm(x + r) @ W^T}",
       "x bf16 f16 f32",
       {"add_rms_norm_matmul_t"},
       "run (the two ops)",
       "run (one row of Q4_0 / Q8_0 on the staged matvec: its blocks normalise x, kernels/qmatmul.cu; else the two "
       "ops)"},
      {"quantized",
       "quantize from float: the activation types Q8_0, Q8_1, Q8_K on every device (parity cases); every type on the "
       "cpu (tests/test_quantize.cpp)",
       "bf16 f16 f32 f64 in",
       {"quantize"},
       "run",
       "run (Q8_0, Q8_1, Q8_K)"},
  };
  rows.insert(rows.end(), rest.begin(), rest.end());
  return rows;
}

std::vector<OpRow> composite_op_rows() {
  return {
      {"", "mean, var, log_sum_exp, norm", "float", {"mean", "var", "log_sum_exp", "norm"}},
      {"",
       "softmax, log_softmax over any dim (the fused last-dim kernels behind a transpose)",
       "float",
       {"softmax", "log_softmax"}},
      {"",
       "clamp, scalar arithmetic, pow (tensor exponent), round_to",
       "all (pow: float; round_to: see semantics.md)",
       {"clamp", "pow"}},
      {"", "sort (values and indices), dot, mv", "all", {"sort", "dot", "mv"}},
      {"",
       "pad_with_zeros, pad_with_same, flip, repeat, tril, triu, cat, stack",
       "all",
       {"pad", "flip", "repeat", "tril", "triu", "cat", "stack"}},
      {"",
       "one_hot, embedding, slice_assign, slice_scatter, meshgrid",
       "all",
       {"one_hot", "embedding", "slice_assign", "slice_scatter"}},
      {"", "slice_set, copy_from (in place into a view)", "all", {"slice_set", "copy_from"}},
      {"",
       "losses (`wick::loss`, include/wick/nn.hpp): nll, cross_entropy, binary_cross_entropy_with_logit, mse, huber",
       "float",
       {"loss"}},
  };
}

std::string ops_markdown() {
  std::string s =
      "# Ops x dtypes x backends\n\n"
      "<!-- Generated by `wick ops --markdown` (tools/check/ops_doc.cpp, from src/ops/op_table.hpp); do not edit. "
      "-->\n\n";
  s += "Dtype groups: **all** = " + dtype_group([](DType) { return true; }) +
       "; **float** = " + dtype_group(dtype_is_float) + "; **int** = " + dtype_group(dtype_is_int) +
       ". Half types (bf16, f16, f8e4m3) compute in f32 and round once. Semantics where Candle and PyTorch differ: "
       "[semantics.md](semantics.md).\n\n";
  s += "Backends: **cpu** is the reference, run by the unit tests and `wick check --device cpu` in CI. **cuda** is "
       "the GPU backend built with nvcc; it has been run on an NVIDIA H100/H200 through `scripts/gpu_suite.sh` "
       "(ctest, `wick check --device cuda:0` against the CPU, compute-sanitizer). **rocm** is the same GPU source "
       "built with ROCm's clang for gfx90a, gfx942, gfx1030 and gfx1100 in CI: compiled and linked, **not run** (no "
       "AMD GPU is reachable from our machines).\n\n";
  s += "| family | op | dtypes | cpu | cuda | rocm |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const OpRow& r : backend_op_rows())
    s += "| " + r.family + " | " + r.ops + " | " + r.dtypes + " | " + r.cpu + " | " + r.cuda + " | " + r.rocm + " |\n";
  s += "\nComposites, built from the entries above in `src/core/` (so every backend has them):\n\n"
       "| op | dtypes |\n| --- | --- |\n";
  for (const OpRow& r : composite_op_rows()) s += "| " + r.ops + " | " + r.dtypes + " |\n";
  s += "\nQuantized rows (`QTensor`, include/wick/quant.hpp) cover the GGUF block types " + ggml_supported_types() +
       ". Their parity cases (tools/check/cases_quant.cpp) check every device against a host reference: dequantize "
       "and embedding bit for bit against the CPU's f32 dequantize (itself bit-identical to gguf-py), qmatmul against "
       "the CPU dequantize + an f64 matmul within the bound derived from the activation quantization (plus half "
       "rounding on the prefill path), quantize's blocks within their rounding bound (and byte-equal to the CPU's on "
       "a GPU).\n";
  return s;
}

}  // namespace wick::check
