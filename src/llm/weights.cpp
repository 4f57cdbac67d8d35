// Weight files (GGUF, HF safetensors) behind one interface, and the loader that checks shapes,
// converts plain weights to the compute dtype and uploads each tensor once.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "archs.hpp"
#include "model_impl.hpp"
#include "wick/error.hpp"
#include "wick/fast.hpp"

namespace fs = std::filesystem;

namespace wick::llm::detail {

std::string shape_string(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

namespace {

class GgufSource : public WeightSource {
 public:
  GgufSource(const GGUFFile& f, std::string path) : f_(f), path_(std::move(path)) {}
  std::string path() const override { return path_; }
  std::string file_name(const std::string& n) const override { return n; }
  bool has(const std::string& n) const override { return f_.contains(n); }
  Shape shape(const std::string& n) const override { return f_.tensor(n).shape(); }
  bool quantized(const std::string& n) const override { return ggml_is_quantized(f_.tensor(n).type); }
  std::string type_name(const std::string& n) const override { return ggml_type_name(f_.tensor(n).type); }
  size_t file_bytes(const std::string& n) const override { return f_.tensor(n).nbytes; }
  Tensor load(const std::string& n, Device d) const override { return f_.load(n, d); }
  QTensor load_quantized(const std::string& n, Device d) const override { return f_.load_quantized(n, d); }
  DType weight_dtype() const override {
    // BF16 when the file's plain matrices are BF16 (as a bf16 conversion writes them), else F16.
    for (const auto& t : f_.tensors())
      if (t.type == GGMLType::BF16) return DType::BF16;
    return DType::F16;
  }

 private:
  GGUFFile f_;
  std::string path_;
};

class HfSource : public WeightSource {
 public:
  HfSource(const std::string& dir, const ArchInfo& arch) : dir_(dir), arch_(arch) {
    std::vector<std::string> files;
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      std::ifstream in(index);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(in);
        for (auto& [name, file] : j.at("weight_map").items()) {
          const std::string fn = file.get<std::string>();
          if (fn.find('/') != std::string::npos || fn.find("..") != std::string::npos)
            throw Error(ErrorKind::Io, "model (" + index.string() +
                                           "): weight_map names a file outside the "
                                           "directory: " +
                                           fn);
          if (std::find(files.begin(), files.end(), fn) == files.end()) files.push_back(fn);
        }
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::Io, "model (" + index.string() + "): bad index: " + e.what());
      }
    } else {
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path().filename());
      std::sort(files.begin(), files.end());
    }
    if (files.empty())
      throw Error(ErrorKind::Io, "model (" + dir + "): no *.safetensors file (nor model.safetensors.index.json)");
    for (const auto& fn : files) {
      files_.push_back(SafeTensors::open((fs::path(dir) / fn).string()));
      for (const auto& n : files_.back().names()) where_.emplace(n, files_.size() - 1);
    }
  }
  std::string path() const override { return dir_; }
  std::string file_name(const std::string& n) const override { return name(n); }
  std::string name(const std::string& n) const { return hf_tensor_name(arch_, n); }
  bool has(const std::string& n) const override { return where_.count(name(n)) != 0; }
  Shape shape(const std::string& n) const override { return st(n).shape(name(n)); }
  bool quantized(const std::string&) const override { return false; }
  std::string type_name(const std::string& n) const override { return dtype_name(st(n).dtype(name(n))); }
  size_t file_bytes(const std::string& n) const override {
    const SafeTensors& s = st(n);
    const std::string h = name(n);
    size_t e = 1;
    for (size_t d : s.shape(h)) e *= d;
    return e * dtype_size(s.dtype(h));
  }
  Tensor load(const std::string& n, Device d) const override { return st(n).load(name(n), d); }
  QTensor load_quantized(const std::string& n, Device) const override {
    throw Error(ErrorKind::Internal, "model: safetensors tensor " + name(n) + " is not quantized");
  }
  DType weight_dtype() const override {
    const std::string e = "token_embd.weight";
    return has(e) ? st(e).dtype(name(e)) : DType::F32;
  }

 private:
  const SafeTensors& st(const std::string& n) const {
    auto it = where_.find(name(n));
    if (it == where_.end()) throw Error(ErrorKind::Argument, "model (" + dir_ + "): no tensor " + name(n));
    return files_[it->second];
  }
  std::string dir_;
  const ArchInfo& arch_;
  std::vector<SafeTensors> files_;
  std::map<std::string, size_t> where_;
};

}  // namespace

std::unique_ptr<WeightSource> open_gguf_weights(const GGUFFile& f, const std::string& path) {
  return std::make_unique<GgufSource>(f, path);
}
std::unique_ptr<WeightSource> open_hf_weights(const std::string& dir, Arch arch) {
  return std::make_unique<HfSource>(dir, arch_info(arch));
}

Tensor Linear::forward(const Tensor& x, const QTensor& x_q8_1) const {
  Tensor y = q.defined() ? fast::matmul_t_q8_1(q, x, x_q8_1) : x.matmul(w.t());
  return b.defined() ? y.add(b) : y;
}

Linear stack_linears(const std::vector<const Linear*>& parts) {
  const Linear& p0 = *parts.at(0);
  const bool quant = p0.q.defined();
  std::vector<QTensor> qs;
  std::vector<Tensor> ws, bs;
  for (const Linear* p : parts) {
    if (p->q.defined() != quant || p->b.defined() != p0.b.defined()) return {};
    if (quant ? p->q.type() != p0.q.type() : p->w.dtype() != p0.w.dtype()) return {};
    if (quant) qs.push_back(p->q); else ws.push_back(p->w);
    if (p->b.defined()) bs.push_back(p->b);
  }
  Linear f;
  if (quant) f.q = QTensor::cat_rows(qs); else f.w = Tensor::cat(ws, 0);
  if (!bs.empty()) f.b = Tensor::cat(bs, 0);
  return f;
}

size_t Linear::bytes() const {
  size_t n = q.defined() ? q.nbytes() : w.numel() * dtype_size(w.dtype());
  if (b.defined()) n += b.numel() * dtype_size(b.dtype());
  return n;
}

WeightLoader::WeightLoader(const WeightSource& src, Device device, DType dtype,
                           std::function<void(size_t, size_t)> progress, size_t total_bytes)
    : src_(src), device_(device), dtype_(dtype), progress_(std::move(progress)), total_(total_bytes) {}

void WeightLoader::check_shape(const std::string& name, const Shape& expected) const {
  if (!src_.has(name))
    throw Error(ErrorKind::Argument, "model (" + src_.path() + "): missing tensor " + src_.file_name(name) +
                                         " (expected shape " + shape_string(expected) + ")");
  const Shape s = src_.shape(name);
  if (s != expected)
    throw Error(ErrorKind::Shape, "model (" + src_.path() + "): tensor " + src_.file_name(name) + " has shape " +
                                      shape_string(s) + ", expected " + shape_string(expected) +
                                      " from the model's config");
}

void WeightLoader::step(const std::string& name) {
  done_ += src_.file_bytes(name);
  if (progress_) progress_(std::min(done_, total_), total_);
}

Tensor WeightLoader::tensor(const std::string& name, const Shape& expected) {
  check_shape(name, expected);
  Tensor t;
  if (src_.quantized(name)) {
    // A quantized norm or bias (rare): dequantize once on the device.
    t = src_.load_quantized(name, device_).dequantize(DType::F32);
  } else {
    t = src_.load(name, device_);
    if (!dtype_is_float(t.dtype()))
      throw Error(ErrorKind::DType, "model (" + src_.path() + "): tensor " + src_.file_name(name) + " is " +
                                        src_.type_name(name) + ", expected a float type");
  }
  if (norm_offset_ != 0 && name.ends_with("norm.weight")) t = t.to_dtype(DType::F32).affine(1.0, norm_offset_);
  t = t.to_dtype(dtype_);
  bytes_ += t.numel() * dtype_size(t.dtype());
  step(name);
  return t;
}

QTensor WeightLoader::qtensor(const std::string& name, const Shape& expected) {
  check_shape(name, expected);
  QTensor q = src_.load_quantized(name, device_);
  bytes_ += q.nbytes();
  step(name);
  return q;
}

Linear WeightLoader::linear(const std::string& stem, const Shape& expected, bool bias) {
  Linear l;
  const std::string wn = stem + ".weight", bn = stem + ".bias";
  check_shape(wn, expected);
  if (src_.quantized(wn)) {
    l.q = qtensor(wn, expected);
  } else {
    l.w = tensor(wn, expected);
  }
  // A bias the family requires must be there; any other bias the file holds is used too.
  if (bias || src_.has(bn)) l.b = tensor(bn, Shape{expected[0]});
  return l;
}

}  // namespace wick::llm::detail
