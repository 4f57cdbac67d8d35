// safetensors: memory-mapped, lazily read; validated by the Rust `safetensors` crate's rules.
#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/checks.hpp"
#include "io/mmap.hpp"
#include "wick/io.hpp"

static_assert(std::endian::native == std::endian::little, "wick's file readers assume a little-endian host");

namespace wick {
namespace {

constexpr size_t kLenBytes = 8;
constexpr uint64_t kMaxHeader = 100'000'000;  // the Rust crate's MAX_HEADER_SIZE

struct StDType {
  const char* name;
  size_t bits;
  bool supported;  // wick has a dtype with these exact bytes
  DType dtype;
};

// Every dtype the safetensors format defines, so that files holding a type wick lacks still
// open (and validate); loading such a tensor is Error(DType). BOOL is read as u8 (same bytes).
constexpr StDType kStDTypes[] = {
    {"BOOL", 8, true, DType::U8},       {"U8", 8, true, DType::U8},        {"I8", 8, false, DType::U8},
    {"F8_E5M2", 8, false, DType::U8},   {"F8_E4M3", 8, true, DType::F8E4M3}, {"F8_E8M0", 8, false, DType::U8},
    {"F4", 4, false, DType::U8},        {"F6_E2M3", 6, false, DType::U8},  {"F6_E3M2", 6, false, DType::U8},
    {"I16", 16, true, DType::I16},      {"U16", 16, false, DType::U8},     {"F16", 16, true, DType::F16},
    {"BF16", 16, true, DType::BF16},    {"I32", 32, true, DType::I32},     {"U32", 32, true, DType::U32},
    {"F32", 32, true, DType::F32},      {"F64", 64, true, DType::F64},     {"I64", 64, true, DType::I64},
    {"U64", 64, false, DType::U8},      {"C64", 64, false, DType::U8},
};

const char* st_name(DType d) {
  switch (d) {
    case DType::U8: return "U8";
    case DType::U32: return "U32";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F8E4M3: return "F8_E4M3";
  }
  return "?";
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Io, "safetensors file '" + path + "': " + what);
}

}  // namespace

struct SafeTensors::Impl {
  struct Entry {
    std::string name;
    const StDType* st;
    Shape shape;
    size_t begin, end;  // relative to the data section
  };
  std::unique_ptr<io::MappedFile> file;
  size_t data_start = 0;
  std::vector<Entry> entries;  // sorted by data offset, which is file order
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, std::string> metadata;

  const Entry& find(const std::string& name, const char* op) const {
    auto it = index.find(name);
    if (it == index.end()) {
      std::string have;
      for (size_t i = 0; i < entries.size() && i < 8; ++i) {
        if (i) have += ", ";
        have += entries[i].name;
      }
      if (entries.size() > 8) have += ", ...";
      throw Error(ErrorKind::Argument, std::string("SafeTensors::") + op + ": no tensor named '" + name + "' in '" +
                                           file->path() + "' (it holds " + std::to_string(entries.size()) +
                                           " tensors: " + have + ")");
    }
    return entries[it->second];
  }
  DType wick_dtype(const Entry& e, const char* op) const {
    if (!e.st->supported)
      throw Error(ErrorKind::DType, std::string("SafeTensors::") + op + ": tensor '" + e.name + "' in '" +
                                        file->path() + "' has dtype " + e.st->name +
                                        ", which wick does not support; convert it to one of U8 U32 I16 I32 I64 "
                                        "BF16 F16 F32 F64 F8_E4M3 when writing the file");
    return e.st->dtype;
  }
};

namespace {

// Rejects a key given twice in one JSON object, naming both byte offsets: nlohmann keeps only
// the last of duplicate keys, so a tensor named twice would load as the later entry, where the
// reference parser (serde_json) rejects the file. Checked in every object (tensor names at the
// top, fields and metadata below). `text` is JSON that nlohmann already accepted, so the scan
// only tracks strings and nesting; each key is decoded by nlohmann (escapes like \u0061).
void check_unique_keys(const std::string& path, const unsigned char* text, size_t n, size_t file_offset) {
  std::vector<std::unordered_map<std::string, size_t>> open;  // one per enclosing { or [
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = text[i];
    if (c == '{' || c == '[') open.emplace_back();
    else if ((c == '}' || c == ']') && !open.empty()) open.pop_back();
    else if (c == '"') {
      const size_t start = i;
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;  // the escaped character cannot close the string
      size_t j = i + 1;
      while (j < n && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r')) ++j;
      if (open.empty() || j >= n || text[j] != ':') continue;  // a value, not a key
      const std::string key = nlohmann::json::parse(text + start, text + i + 1).get<std::string>();
      auto [it, fresh] = open.back().emplace(key, file_offset + start);
      if (!fresh)
        bad(path, "header names '" + key + "' twice in one object (at byte offsets " + std::to_string(it->second) +
                      " and " + std::to_string(file_offset + start) + "); each tensor name and field may appear once");
    }
  }
}

uint64_t get_u64(const nlohmann::json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_unsigned()) bad(path, what + " must be a non-negative integer, got " + v.dump());
  return v.get<uint64_t>();
}

void parse_header(SafeTensors::Impl& impl) {
  const std::string& path = impl.file->path();
  const unsigned char* buf = impl.file->data();
  const size_t size = impl.file->size();
  if (size < kLenBytes)
    bad(path, "file is " + std::to_string(size) + " bytes, too small to hold the 8-byte header length");
  uint64_t n;
  std::memcpy(&n, buf, 8);
  if (n > kMaxHeader)
    bad(path, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeader) +
                  " bytes (not a safetensors file, or corrupt)");
  if (n > size - kLenBytes)
    bad(path, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                  " bytes): the file is truncated or not safetensors");
  // What nlohmann tolerates and serde_json does not: a UTF-8 byte order mark (nlohmann skips
  // it) and a NUL byte (nlohmann stops there, dropping the rest). Raw NUL is never valid JSON
  // text (inside strings it must be escaped); the format's padding is spaces (0x20).
  const unsigned char* text = buf + kLenBytes;
  if (n >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF)
    bad(path, "header starts with a UTF-8 byte order mark (byte offset 8); the format's JSON has none");
  if (const void* nul = std::memchr(text, 0, size_t(n)))
    bad(path, "header holds a NUL byte at byte offset " +
                  std::to_string(kLenBytes + size_t(static_cast<const unsigned char*>(nul) - text)) +
                  " (not valid JSON; pad the header with spaces)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(buf + kLenBytes, buf + kLenBytes + n);
  } catch (const nlohmann::json::exception& e) {
    bad(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad(path, "header must be a JSON object, got " + std::string(header.type_name()));
  check_unique_keys(path, text, size_t(n), kLenBytes);

  for (auto& [key, val] : header.items()) {
    if (key == "__metadata__") {
      if (val.is_null()) continue;
      if (!val.is_object()) bad(path, "__metadata__ must be an object of strings");
      for (auto& [mk, mv] : val.items()) {
        if (!mv.is_string()) bad(path, "__metadata__ value for '" + mk + "' must be a string, got " + mv.dump());
        impl.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "'";
    if (!val.is_object()) bad(path, where + " must be an object with dtype, shape and data_offsets");
    auto dt = val.find("dtype"), sh = val.find("shape"), of = val.find("data_offsets");
    if (dt == val.end() || sh == val.end() || of == val.end())
      bad(path, where + " lacks one of dtype, shape, data_offsets: " + val.dump());
    if (!dt->is_string()) bad(path, where + ": dtype must be a string");
    const std::string dname = dt->get<std::string>();
    const StDType* st = nullptr;
    for (const auto& s : kStDTypes)
      if (dname == s.name) st = &s;
    if (!st) bad(path, where + " has unknown dtype '" + dname + "'");
    if (!sh->is_array()) bad(path, where + ": shape must be an array of integers");
    SafeTensors::Impl::Entry e{key, st, {}, 0, 0};
    for (const auto& d : *sh) e.shape.push_back(size_t(get_u64(d, path, where + " shape entry")));
    if (!of->is_array() || of->size() != 2) bad(path, where + ": data_offsets must be [begin, end]");
    e.begin = size_t(get_u64((*of)[0], path, where + " data_offsets"));
    e.end = size_t(get_u64((*of)[1], path, where + " data_offsets"));
    impl.entries.push_back(std::move(e));
  }

  // As the Rust crate: in offset order, each tensor starts where the previous ended, its span is
  // exactly its byte size, and together they cover the data section to the end of the file.
  std::stable_sort(impl.entries.begin(), impl.entries.end(), [](const auto& a, const auto& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  size_t at = 0;
  for (const auto& e : impl.entries) {
    const std::string where = "tensor '" + e.name + "'";
    std::string span = "[";  // built by appends: GCC 12 warns falsely on "[" + std::string
    span.append(std::to_string(e.begin)).append(", ").append(std::to_string(e.end)).append("]");
    if (e.begin != at || e.end < e.begin)
      bad(path, where + " has data_offsets " + span + " but the previous tensor ends at " + std::to_string(at) +
                    ": offsets must be contiguous, non-overlapping and start at 0");
    at = e.end;
    size_t n = 1;
    for (size_t d : e.shape)
      if (__builtin_mul_overflow(n, d, &n)) bad(path, where + " shape " + shape_str(e.shape) + " overflows");
    size_t bits;
    if (__builtin_mul_overflow(n, e.st->bits, &bits)) bad(path, where + " shape " + shape_str(e.shape) + " overflows");
    if (bits % 8) bad(path, where + " of " + e.st->name + " does not fill a whole number of bytes");
    try {
      checked_numel(e.shape, "safetensors");  // also its non-zero dims, when one dim is 0
    } catch (const Error&) {
      bad(path, where + " shape " + shape_str(e.shape) + " has more elements than a tensor can hold");
    }
    if (e.end - e.begin != bits / 8)
      bad(path, where + " is " + e.st->name + " " + shape_str(e.shape) + " = " + std::to_string(bits / 8) +
                    " bytes, but data_offsets " + span + " span " + std::to_string(e.end - e.begin));
  }
  const size_t data = size - kLenBytes - size_t(n);
  if (at != data)
    bad(path, "tensors cover " + std::to_string(at) + " bytes of data but the file holds " + std::to_string(data) +
                  " after the header" + (at > data ? " (truncated file)" : " (trailing bytes)"));
  impl.data_start = kLenBytes + size_t(n);
  for (size_t i = 0; i < impl.entries.size(); ++i) {
    if (!impl.index.emplace(impl.entries[i].name, i).second) bad(path, "tensor '" + impl.entries[i].name + "' appears twice");
  }
}

}  // namespace

SafeTensors SafeTensors::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->file = std::make_unique<io::MappedFile>(path);
  parse_header(*impl);
  SafeTensors st;
  st.impl_ = std::move(impl);
  return st;
}

std::vector<std::string> SafeTensors::names() const {
  std::vector<std::string> out;
  for (const auto& e : impl_->entries) out.push_back(e.name);
  return out;
}

bool SafeTensors::contains(const std::string& name) const { return impl_->index.count(name) != 0; }

DType SafeTensors::dtype(const std::string& name) const { return impl_->wick_dtype(impl_->find(name, "dtype"), "dtype"); }

Shape SafeTensors::shape(const std::string& name) const { return impl_->find(name, "shape").shape; }

Tensor SafeTensors::load(const std::string& name, Device device) const {
  const auto& e = impl_->find(name, "load");
  DType d = impl_->wick_dtype(e, "load");
  const unsigned char* p = impl_->file->data() ? impl_->file->data() + impl_->data_start + e.begin : nullptr;
  if (std::strcmp(e.st->name, "BOOL") == 0) {  // any nonzero byte is true
    std::vector<uint8_t> v(p, p + (e.end - e.begin));
    for (auto& b : v) b = b ? 1 : 0;
    return Tensor::from_data(v.data(), e.shape, d, device);
  }
  return Tensor::from_data(p, e.shape, d, device);
}

const std::map<std::string, std::string>& SafeTensors::metadata() const { return impl_->metadata; }

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device) {
  SafeTensors st = SafeTensors::open(path);
  std::map<std::string, Tensor> out;
  for (const auto& n : st.names()) out.emplace(n, st.load(n, device));
  return out;
}

void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  // The Rust crate's order: larger element types first, then by name, so each tensor's data
  // stays aligned to its element size (the header is padded to 8 bytes).
  std::vector<std::pair<std::string, const Tensor*>> order;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw Error(ErrorKind::Argument, "save_safetensors: tensor '" + name + "' is undefined");
    if (name == "__metadata__")
      throw Error(ErrorKind::Argument, "save_safetensors: '__metadata__' is reserved and cannot name a tensor");
    order.emplace_back(name, &t);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    size_t sa = dtype_size(a.second->dtype()), sb = dtype_size(b.second->dtype());
    return sa != sb ? sa > sb : a.first < b.first;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t at = 0;
  for (const auto& [name, t] : order) {
    size_t bytes = checked_bytes(t->numel(), dtype_size(t->dtype()), "save_safetensors");
    check_host_alloc(bytes, "save_safetensors");  // each tensor passes through one host buffer
    header[name] = {{"dtype", st_name(t->dtype())}, {"shape", t->shape()}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(ErrorKind::Io, "save_safetensors: cannot open '" + path + "' for writing: " + std::strerror(errno));
  uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(h.data(), std::streamsize(h.size()));
  std::vector<char> buf;
  for (const auto& [name, t] : order) {
    buf.resize(t->numel() * dtype_size(t->dtype()));
    t->copy_to_host(buf.data());  // contiguous row-major, from any device
    f.write(buf.data(), std::streamsize(buf.size()));
  }
  f.close();
  if (!f) throw Error(ErrorKind::Io, "save_safetensors: writing '" + path + "' failed (disk full?)");
}

}  // namespace wick
