#pragma once
// Internals of the model part: weight files behind one interface, config parsing, layers.
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wick/gguf.hpp"
#include "wick/io.hpp"
#include "wick/llm/model.hpp"
#include "wick/quant.hpp"
#include "wick/tensor.hpp"

namespace wick::llm::detail {

// "1.23 GiB", for messages about memory.
std::string gib(size_t bytes);
// Error(Index) "<who>: token id N is outside the vocabulary (V tokens)" for the first id outside [0, vocab).
void check_token_ids(std::span<const int32_t> ids, size_t vocab, const std::string& who);

// The tensors of a model file set, named as GGUF names them ("blk.3.attn_q.weight"); the HF source
// maps those names to its own ("model.layers.3.self_attn.q_proj.weight").
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual std::string path() const = 0;                              // for messages
  virtual std::string file_name(const std::string& name) const = 0;  // the tensor's name in the file
  virtual bool has(const std::string& name) const = 0;
  virtual Shape shape(const std::string& name) const = 0;  // row-major
  virtual bool quantized(const std::string& name) const = 0;
  virtual std::string type_name(const std::string& name) const = 0;  // "Q4_K", "f16", ...
  virtual size_t file_bytes(const std::string& name) const = 0;
  virtual Tensor load(const std::string& name, Device device) const = 0;  // file dtype
  virtual QTensor load_quantized(const std::string& name, Device device) const = 0;
  // The dtype of plain float weights (f16/bf16/f32): what the file mostly stores.
  virtual DType weight_dtype() const = 0;
};

std::unique_ptr<WeightSource> open_gguf_weights(const GGUFFile& f, const std::string& path);
// A Hugging Face directory's safetensors, named as the architecture's table row maps them.
std::unique_ptr<WeightSource> open_hf_weights(const std::string& dir, Arch arch);

ModelConfig config_from_gguf(const GGUFFile& f, const std::string& path);
ModelConfig config_from_hf(const std::string& config_json_path);

// y = x @ W^T (+ b): W a plain Tensor or a QTensor, kept as the file stored it where quantized.
struct Linear {
  Tensor w;   // (out, in), compute dtype
  QTensor q;  // (out, in), quantized
  Tensor b;   // (out), optional
  // x_q8_1: x's rows in Q8_1 from x's producer (fast::rms_norm_q8_1, fast::silu_mul_q8_1, ...),
  // which a quantized product's matrix-vector path takes instead of quantizing x (fast::matmul_t_q8_1);
  // ignored by plain weights.
  Tensor forward(const Tensor& x, const QTensor& x_q8_1 = QTensor()) const;
  size_t bytes() const;
  size_t out_features() const { return q.defined() ? q.dim(0) : w.dim(0); }
  bool defined() const { return q.defined() || w.defined(); }
};

// One Linear computing several that share their input (q/k/v, gate/up): the output's columns are
// the parts' outputs side by side, so a decode step runs one matrix product (and, for quantized
// weights, one activation quantization) instead of one per part. Empty when the parts cannot be
// stacked (quantized and plain mixed, different quantized types or dtypes, biases on some only).
Linear stack_linears(const std::vector<const Linear*>& parts);

// Loads tensors by GGUF name, checks their shapes, converts plain ones to the compute dtype on the
// device, and reports progress.
class WeightLoader {
 public:
  WeightLoader(const WeightSource& src, Device device, DType dtype, std::function<void(size_t, size_t)> progress,
               size_t total_bytes);
  Tensor tensor(const std::string& name, const Shape& expected);             // plain, compute dtype
  QTensor qtensor(const std::string& name, const Shape& expected);           // a quantized one, as stored
  Linear linear(const std::string& name, const Shape& expected, bool bias);  // bias: required
  size_t bytes() const { return bytes_; }                                    // device bytes loaded so far
  // Added (in f32) to every "*norm.weight" tensor() loads: Gemma's checkpoints store w of (1 + w).
  void set_norm_offset(double offset) { norm_offset_ = offset; }

 private:
  void check_shape(const std::string& name, const Shape& expected) const;
  void step(const std::string& name);
  const WeightSource& src_;
  Device device_;
  DType dtype_;
  std::function<void(size_t, size_t)> progress_;
  size_t total_ = 0, done_ = 0, bytes_ = 0;
  double norm_offset_ = 0;
};

std::string shape_string(const Shape& s);

}  // namespace wick::llm::detail
