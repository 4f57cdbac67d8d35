// `wick info FILE` and `wick quantize` (file_tools.hpp).
#include "check/file_tools.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "wick/gguf.hpp"
#include "wick/io.hpp"

namespace wick::check {
namespace {

bool is_gguf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::Io, "cannot open '" + path + "' for reading");
  char magic[4] = {};
  f.read(magic, 4);
  return f.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char s[32];
  std::snprintf(s, sizeof s, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return s;
}

// A string as a quoted literal, control characters escaped, cut to `limit` characters.
std::string quoted(const std::string& s, size_t limit) {
  std::string out = "\"";
  size_t shown = 0;
  for (unsigned char c : s) {
    if (shown++ == limit) {
      out += "\"... (" + std::to_string(s.size()) + " bytes)";
      return out;
    }
    if (c == '"' || c == '\\')
      out += std::string("\\") + char(c);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char e[8];
      std::snprintf(e, sizeof e, "\\x%02x", c);
      out += e;
    } else
      out += char(c);
  }
  return out + "\"";
}

std::string value_str(const GGUFValue& v, size_t max_items) {
  char s[64];
  switch (v.type) {
    case GGUFType::U8:
    case GGUFType::U16:
    case GGUFType::U32:
    case GGUFType::U64:
      return std::to_string(v.u);
    case GGUFType::I8:
    case GGUFType::I16:
    case GGUFType::I32:
    case GGUFType::I64:
      return std::to_string(v.i);
    case GGUFType::F32:
    case GGUFType::F64:
      std::snprintf(s, sizeof s, "%.9g", v.f);
      return s;
    case GGUFType::Bool:
      return v.b ? "true" : "false";
    case GGUFType::String:
      return quoted(v.s, 120);
    case GGUFType::Array: {
      std::string out = "[";
      const size_t n = v.array.size(), shown = std::min(n, max_items);
      for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + value_str(v.array[i], max_items);
      if (shown < n) out += std::string(shown ? ", " : "") + "...";
      return out + "]";
    }
  }
  return "?";
}

std::string type_str(const GGUFValue& v) {
  if (v.type != GGUFType::Array) return gguf_type_name(v.type);
  return std::string("array of ") + std::to_string(v.array.size()) + " " + gguf_type_name(v.elem_type);
}

std::string dims_str(const std::vector<size_t>& s) { return shape_str(s); }

void print_totals(std::FILE* out, const std::map<std::string, std::pair<size_t, double>>& per_type, size_t n,
                  double bytes) {
  std::fprintf(out, "totals:\n");
  for (const auto& [t, c] : per_type)
    std::fprintf(out, "  %-8s %6zu tensors %14.0f bytes (%s)\n", t.c_str(), c.first, c.second,
                 human_bytes(c.second).c_str());
  std::fprintf(out, "  %-8s %6zu tensors %14.0f bytes (%s)\n", "all", n, bytes, human_bytes(bytes).c_str());
}

void print_gguf(const std::string& path, std::FILE* out, size_t max_items) {
  GGUFFile f = GGUFFile::open(path);
  const auto& md = f.metadata();
  const auto& ts = f.tensors();
  std::fprintf(out, "%s: GGUF v%u, alignment %zu, %zu metadata keys, %zu tensors, data at byte %zu\n", path.c_str(),
               f.version(), f.alignment(), md.size(), ts.size(), f.data_offset());
  std::fprintf(out, "metadata:\n");
  size_t key_w = 0;
  for (const auto& kv : md) key_w = std::max(key_w, kv.first.size());
  for (const auto& [key, v] : md)
    std::fprintf(out, "  %-*s %-20s %s\n", int(key_w), key.c_str(), type_str(v).c_str(),
                 value_str(v, max_items).c_str());
  std::fprintf(out, "tensors (shape row-major, offset from the data section):\n");
  size_t name_w = 4;
  for (const auto& t : ts) name_w = std::max(name_w, t.name.size());
  std::fprintf(out, "  %-*s %-22s %-8s %14s %14s\n", int(name_w), "name", "shape", "type", "bytes", "offset");
  std::map<std::string, std::pair<size_t, double>> per_type;
  double total = 0;
  for (const auto& t : ts) {
    const char* tn = ggml_type_name(t.type);
    std::fprintf(out, "  %-*s %-22s %-8s %14zu %14llu\n", int(name_w), t.name.c_str(), dims_str(t.shape()).c_str(), tn,
                 t.nbytes, static_cast<unsigned long long>(t.offset));
    auto& c = per_type[tn];
    ++c.first;
    c.second += double(t.nbytes);
    total += double(t.nbytes);
  }
  print_totals(out, per_type, ts.size(), total);
}

void print_safetensors(const std::string& path, std::FILE* out) {
  SafeTensors st = SafeTensors::open(path);
  const std::vector<std::string> names = st.names();
  std::fprintf(out, "%s: safetensors, %zu metadata keys, %zu tensors\n", path.c_str(), st.metadata().size(),
               names.size());
  std::fprintf(out, "metadata:\n");
  for (const auto& [k, v] : st.metadata()) std::fprintf(out, "  %s %s\n", k.c_str(), quoted(v, 120).c_str());
  size_t name_w = 4;
  for (const auto& n : names) name_w = std::max(name_w, n.size());
  std::fprintf(out, "tensors (in file order):\n  %-*s %-22s %-8s %14s\n", int(name_w), "name", "shape", "dtype",
               "bytes");
  std::map<std::string, std::pair<size_t, double>> per_type;
  double total = 0;
  for (const auto& n : names) {
    std::string dt = "?", shape = "?";
    double bytes = 0;
    try {  // a dtype wick lacks (I8, U16, ...) is listed without size
      const DType d = st.dtype(n);
      const Shape s = st.shape(n);
      dt = dtype_name(d);
      shape = shape_str(s);
      bytes = double(shape_numel(s) * dtype_size(d));
    } catch (const Error& e) {
      dt = "unsupported";
    }
    std::fprintf(out, "  %-*s %-22s %-8s %14.0f\n", int(name_w), n.c_str(), shape.c_str(), dt.c_str(), bytes);
    auto& c = per_type[dt];
    ++c.first;
    c.second += bytes;
    total += bytes;
  }
  print_totals(out, per_type, names.size(), total);
}

// "wick Io error: x" -> "x": the kind is said again when the message is wrapped.
std::string bare(const Error& e) {
  std::string m = e.what();
  const std::string head = std::string("wick ") + error_kind_name(e.kind()) + " error: ";
  return m.rfind(head, 0) == 0 ? m.substr(head.size()) : m;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::optional<DType> dtype_of_plain(GGMLType t) {
  switch (t) {
    case GGMLType::F32:
      return DType::F32;
    case GGMLType::F16:
      return DType::F16;
    case GGMLType::BF16:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<uint8_t> b(c.numel() * dtype_size(c.dtype()));
  if (!b.empty()) c.copy_to_host(b.data());
  return b;
}

std::vector<uint64_t> ggml_dims(const Shape& s) { return std::vector<uint64_t>(s.rbegin(), s.rend()); }

// One input tensor, from either format.
struct Source {
  std::string name;
  Shape shape;
  GGMLType type;  // the input's type (safetensors dtypes mapped; U8/U32/F8E4M3/bool: nullopt -> error)
  size_t nbytes;
  std::function<Tensor()> load;               // plain types
  std::function<std::vector<uint8_t>()> raw;  // the stored bytes
  std::function<QTensor()> load_quantized;    // block types
};

}  // namespace

void print_file_info(const std::string& path, std::FILE* out, size_t max_items) {
  if (is_gguf(path)) return print_gguf(path, out, max_items);
  try {
    print_safetensors(path, out);
  } catch (const Error& e) {
    throw Error(ErrorKind::Io, "'" + path + "' is neither a GGUF file (it does not start with 'GGUF') nor a " +
                                   "safetensors file (" + bare(e) + ")");
  }
}

std::vector<GGMLType> quantize_file_types() {
  return {GGMLType::Q4_0,  GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1, GGMLType::Q8_0,   GGMLType::Q2_K,
          GGMLType::Q3_K,  GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::IQ4_NL, GGMLType::IQ4_XS,
          GGMLType::MXFP4, GGMLType::F16,  GGMLType::BF16, GGMLType::F32};
}

uint32_t llama_ftype(GGMLType t) {
  switch (t) {
    case GGMLType::F32:
      return 0;
    case GGMLType::F16:
      return 1;
    case GGMLType::Q4_0:
      return 2;
    case GGMLType::Q4_1:
      return 3;
    case GGMLType::Q8_0:
      return 7;
    case GGMLType::Q5_0:
      return 8;
    case GGMLType::Q5_1:
      return 9;
    case GGMLType::Q2_K:
      return 10;
    case GGMLType::Q3_K:
      return 12;  // Q3_K_M
    case GGMLType::Q4_K:
      return 15;  // Q4_K_M
    case GGMLType::Q5_K:
      return 17;  // Q5_K_M
    case GGMLType::Q6_K:
      return 18;
    case GGMLType::IQ4_NL:
      return 25;
    case GGMLType::IQ4_XS:
      return 30;
    case GGMLType::BF16:
      return 32;
    case GGMLType::MXFP4:
      return 38;  // MXFP4_MOE
    default:
      throw Error(ErrorKind::Argument,
                  std::string("llama_ftype: ") + ggml_type_name(t) + " is not a whole-file type of llama.cpp");
  }
}

std::string quantize_skip_reason(const std::string& name, const std::vector<size_t>& shape, GGMLType type) {
  if (shape.size() < 2) return "rank " + std::to_string(shape.size()) + " (norms, biases: F32)";
  if (!ends_with(name, "weight")) return "the name does not end in 'weight'";
  for (const char* kept : {"_norm.weight", "ffn_gate_inp.weight", "position_embd", "pos_embd", "token_types"})
    if (name.find(kept) != std::string::npos)
      return std::string("a '") + kept + "' tensor (kept as llama.cpp keeps it)";
  const size_t be = ggml_block_size(type);
  if (shape.back() % be != 0)
    return "rows of " + std::to_string(shape.back()) + " are not whole " + ggml_type_name(type) + " blocks of " +
           std::to_string(be);
  return "";
}

QuantizeSummary quantize_file(const QuantizeOptions& opt, const std::function<void(const QuantizeStep&)>& progress) {
  const auto types = quantize_file_types();
  if (std::find(types.begin(), types.end(), opt.type) == types.end())
    throw Error(ErrorKind::Argument, std::string("quantize: ") + ggml_type_name(opt.type) +
                                         " is not a file type; use one of quantize_file_types()");
  // The input stays mapped while the output is written: writing over it would truncate the mapping.
  std::error_code ec;
  if (std::filesystem::exists(opt.out, ec) && std::filesystem::equivalent(opt.in, opt.out, ec))
    throw Error(ErrorKind::Argument, "quantize: OUT '" + opt.out + "' is the input file; write to another path");
  std::vector<Source> sources;
  std::vector<std::pair<std::string, GGUFValue>> metadata;
  if (is_gguf(opt.in)) {
    GGUFFile f = GGUFFile::open(opt.in);
    metadata = f.metadata();
    for (const GGUFTensorInfo& t : f.tensors()) {
      const std::string name = t.name;
      Source s{name, t.shape(), t.type, t.nbytes, {}, {}, {}};
      s.load = [f, name] { return f.load(name); };
      s.raw = [f, name] {
        auto [p, n] = f.raw(name);
        return std::vector<uint8_t>(p, p + n);
      };
      s.load_quantized = [f, name] { return f.load_quantized(name); };
      sources.push_back(std::move(s));
    }
  } else {
    const SafeTensors st = [&] {
      try {
        return SafeTensors::open(opt.in);
      } catch (const Error& e) {
        throw Error(ErrorKind::Io,
                    "quantize: '" + opt.in + "' is neither a GGUF file nor a safetensors file (" + bare(e) + ")");
      }
    }();
    for (const std::string& name : st.names()) {
      DType d;
      try {
        d = st.dtype(name);
      } catch (const Error& e) {
        throw Error(e.kind(), "quantize: tensor '" + name + "': " + bare(e));
      }
      std::optional<GGMLType> g = ggml_type_of(d);
      if (!g)
        throw Error(ErrorKind::DType, "quantize: tensor '" + name + "' is " + dtype_name(d) +
                                          ", which GGUF cannot store (it holds F32, F16, BF16, F64, I16, I32, I64)");
      const Shape shape = st.shape(name);
      Source s{name, shape, *g, shape_numel(shape) * dtype_size(d), {}, {}, {}};
      s.load = [st, name] { return st.load(name); };
      s.raw = [st, name] { return bytes_of(st.load(name)); };
      sources.push_back(std::move(s));
    }
  }
  // As llama-quantize: quantization_version, then file_type, each replaced where the file has it.
  auto set_key = [&](const std::string& key, GGUFValue v) {
    for (auto& kv : metadata)
      if (kv.first == key) {
        kv.second = std::move(v);
        return;
      }
    metadata.emplace_back(key, std::move(v));
  };
  set_key("general.quantization_version", GGUFValue::of_u32(2));
  set_key("general.file_type", GGUFValue::of_u32(llama_ftype(opt.type)));

  QuantizeSummary sum;
  size_t total = 0, done = 0;
  for (const Source& s : sources) total += s.nbytes;
  std::vector<GGUFRawTensor> raw;
  std::map<std::string, size_t> per_type;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Source& s = sources[i];
    QuantizeStep step;
    step.index = i + 1;
    step.count = sources.size();
    step.name = s.name;
    step.from = ggml_type_name(s.type);
    step.in_bytes = s.nbytes;
    GGUFRawTensor out{s.name, s.type, ggml_dims(s.shape), {}};
    try {
      bool keep_f32 = false;
      for (const auto& p : opt.keep_f32) keep_f32 = keep_f32 || s.name.find(p) != std::string::npos;
      std::string why = keep_f32 ? "--keep-f32" : quantize_skip_reason(s.name, s.shape, opt.type);
      const bool plain_float = dtype_of_plain(s.type).has_value() || s.type == GGMLType::F64;
      // The values as a float Tensor (plain types load; block types dequantize).
      auto values = [&]() -> Tensor {
        if (ggml_is_quantized(s.type)) return s.load_quantized().dequantize(DType::F32);
        return s.load();
      };
      if (why.empty() && s.type == opt.type) {
        out.bytes = s.raw();  // already the asked type
      } else if (why.empty() && ggml_is_quantized(s.type) && !opt.allow_requantize) {
        throw Error(ErrorKind::Argument, std::string("it is already ") + ggml_type_name(s.type) +
                                             "; quantizing it again to " + ggml_type_name(opt.type) +
                                             " loses accuracy: pass --allow-requantize to do it anyway");
      } else if (why.empty() && !ggml_is_quantized(s.type) && !plain_float) {
        why = std::string("integer tensor (") + ggml_type_name(s.type) + ")";
      }
      if (!out.bytes.empty()) {
      } else if (why.empty()) {
        const Tensor x = values();
        if (auto d = dtype_of_plain(opt.type)) {
          out.bytes = bytes_of(x.to_dtype(*d));
        } else {
          out.bytes = QTensor::quantize(x, opt.type).to_bytes();
        }
        out.type = opt.type;
      } else if (keep_f32 || s.shape.size() < 2) {
        // F32 as the converter writes norms and biases; integer tensors and F64 stay as they are.
        if (ggml_is_quantized(s.type) || dtype_of_plain(s.type)) {
          out.bytes = bytes_of(values().to_dtype(DType::F32));
          out.type = GGMLType::F32;
        } else {
          out.bytes = s.raw();
        }
      } else {
        out.bytes = s.raw();
      }
      step.why = why;
    } catch (const Error& e) {
      throw Error(e.kind(),
                  "tensor '" + s.name + "' " + shape_str(s.shape) + " " + ggml_type_name(s.type) + ": " + bare(e));
    }
    step.to = ggml_type_name(out.type);
    step.out_bytes = out.bytes.size();
    done += s.nbytes;
    step.done_bytes = done;
    step.total_bytes = total;
    ++sum.tensors;
    if (step.why.empty() && out.type == opt.type) ++sum.quantized;
    sum.in_bytes += s.nbytes;
    sum.out_bytes += out.bytes.size();
    ++per_type[step.to];
    raw.push_back(std::move(out));
    if (progress) progress(step);
  }
  save_gguf(opt.out, metadata, {}, raw);
  for (const auto& kv : per_type) sum.per_type.push_back(kv);
  return sum;
}

}  // namespace wick::check
