#pragma once
// The file commands of the `wick` tool: `wick info FILE` (a GGUF's or safetensors' metadata and
// tensor table) and `wick quantize IN OUT --type T`. In the tool's library so tests can call them.
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "wick/quant.hpp"

namespace wick::check {

// ---- info
// Prints what FILE holds: for a GGUF its version, alignment, metadata (arrays longer than
// `max_items` abbreviated to their first items and the count) and tensor table (name, shape,
// type, bytes, offset) with totals per type; for safetensors its metadata and tensor table.
// Neither format: Error(Io) naming the file.
void print_file_info(const std::string& path, std::FILE* out, size_t max_items = 8);

// ---- quantize
// The types `wick quantize --type` takes: the block types llama.cpp writes model files in (not
// the activation formats Q8_1/Q8_K) and the plain F32/F16/BF16. Names as ggml spells them.
std::vector<GGMLType> quantize_file_types();
// general.file_type for a whole-file type, numbered as llama.h's LLAMA_FTYPE (Q4_K: Q4_K_M, as
// llama-quantize's alias does).
uint32_t llama_ftype(GGMLType t);

struct QuantizeOptions {
  std::string in, out;
  GGMLType type = GGMLType::Q8_0;
  std::vector<std::string> keep_f32;  // tensors whose name contains one of these: F32
  bool allow_requantize = false;      // quantized input tensors may be dequantized and quantized again
};

// What happened to one tensor.
struct QuantizeStep {
  size_t index = 0, count = 0;             // 1-based position of this tensor, and the total
  std::string name, from, to, why;         // types as ggml names them; why it was not quantized
  size_t in_bytes = 0, out_bytes = 0;      // this tensor's
  size_t done_bytes = 0, total_bytes = 0;  // input bytes handled so far, of all
};

struct QuantizeSummary {
  size_t tensors = 0, quantized = 0, in_bytes = 0, out_bytes = 0;
  std::vector<std::pair<std::string, size_t>> per_type;  // output type -> tensors
};

// Which tensors become `type` (llama.cpp's llama-quantize rules, simplified): rank >= 2, the name
// ends in "weight", is not a norm ("_norm.weight"), a MoE router ("ffn_gate_inp.weight"), a
// position or token-type embedding, and the rows (last dim) are whole blocks of `type`. Rank 0/1
// tensors (norms, biases, scales) become F32, as llama.cpp's converter writes them; everything
// else keeps its type. Returns the reason a tensor is not quantized, empty when it is.
std::string quantize_skip_reason(const std::string& name, const std::vector<size_t>& shape, GGMLType type);

// Reads IN (GGUF or safetensors), writes OUT as GGUF v3. From a GGUF every metadata key is kept
// (general.quantization_version and general.file_type set as llama-quantize sets them); from
// safetensors only those two are written. `progress` is called after each tensor. A failure is
// Error naming the tensor.
QuantizeSummary quantize_file(const QuantizeOptions& opt, const std::function<void(const QuantizeStep&)>& progress);

}  // namespace wick::check
