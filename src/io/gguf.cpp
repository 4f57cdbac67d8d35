// GGUF reader: every read is bounds-checked against the mapping, every count is bounded by the
// bytes left before anything is reserved, so a malformed file is Error(Io), never a crash.
#include "wick/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "backend/registry.hpp"
#include "io/mmap.hpp"
#include "ops/quant_blocks.hpp"

static_assert(std::endian::native == std::endian::little, "wick's file readers assume a little-endian host");

namespace wick {

struct GGUFArray::Data {
  GGUFType elem = GGUFType::U8;
  size_t n = 0;
  // Numbers and bools: n elements at the file's width. Nested arrays: their encoding in the file (each read
  // again when asked for), so that arrays of small arrays do not cost a GGUFValue each.
  std::vector<unsigned char> raw;
  std::string chars;              // string elements, one after another
  std::vector<size_t> ends;       // where each string element ends in chars, each nested array in raw
  std::vector<GGUFValue> values;  // elements a builder was given that the forms above do not hold
};

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t kDefaultAlignment = 32;
constexpr int kMaxNesting = 8;    // arrays inside arrays, beyond which a file is refused
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS: llama.cpp refuses more

struct TypeInfo {
  GGMLType type;
  const char* name;
  size_t block, bytes;
  bool plain;  // loads as a Tensor
  DType dtype;
};

// Names and block sizes come from the one ggml type table (ops/quant_blocks.hpp); this list adds
// only which types a file may hold and how the plain ones load.
constexpr TypeInfo row(GGMLType t, bool plain, DType dtype) {
  const quant::GGMLTypeInfo* q = quant::ggml_type_info(uint32_t(t));
  return {t, q->name, q->block_elems, q->block_bytes, plain, dtype};
}

constexpr TypeInfo kTypes[] = {
    row(GGMLType::F32, true, DType::F32),       row(GGMLType::F16, true, DType::F16),
    row(GGMLType::BF16, true, DType::BF16),     row(GGMLType::F64, true, DType::F64),
    row(GGMLType::I8, false, DType::U8),        row(GGMLType::I16, true, DType::I16),
    row(GGMLType::I32, true, DType::I32),       row(GGMLType::I64, true, DType::I64),
    row(GGMLType::Q4_0, false, DType::U8),      row(GGMLType::Q4_1, false, DType::U8),
    row(GGMLType::Q5_0, false, DType::U8),      row(GGMLType::Q5_1, false, DType::U8),
    row(GGMLType::Q8_0, false, DType::U8),      row(GGMLType::Q8_1, false, DType::U8),
    row(GGMLType::Q2_K, false, DType::U8),      row(GGMLType::Q3_K, false, DType::U8),
    row(GGMLType::Q4_K, false, DType::U8),      row(GGMLType::Q5_K, false, DType::U8),
    row(GGMLType::Q6_K, false, DType::U8),      row(GGMLType::Q8_K, false, DType::U8),
    row(GGMLType::IQ4_NL, false, DType::U8),    row(GGMLType::IQ4_XS, false, DType::U8),
    row(GGMLType::MXFP4, false, DType::U8),
};

const TypeInfo* type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (uint32_t(t.type) == id) return &t;
  return nullptr;
}

const TypeInfo& info(GGMLType t) {
  const TypeInfo* p = type_info(uint32_t(t));
  if (!p) throw Error(ErrorKind::Argument, "ggml type id " + std::to_string(uint32_t(t)) + " is not one wick knows");
  return *p;
}

std::string supported_list() {
  std::string s;
  for (const auto& t : kTypes)
    s.append(s.empty() ? "" : " ").append(t.name).append("=").append(std::to_string(uint32_t(t.type)));
  return s;
}

// A cursor over the mapping; every read checks the bytes left and names the field on failure.
struct Reader {
  const std::string& path;
  const unsigned char* p;
  size_t size, pos = 0;

  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw Error(ErrorKind::Io, "GGUF file '" + path + "': " + what + " (at byte offset " + std::to_string(at) + ")");
  }
  size_t left() const { return size - pos; }
  void need(size_t n, const std::string& field) const {
    if (n > left())
      fail(field + " needs " + std::to_string(n) + " bytes but the file ends after " + std::to_string(left()) +
               " (truncated file)",
           pos);
  }
  template <class T>
  T get(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(const std::string& field) {
    const size_t at = pos;
    uint64_t n = get<uint64_t>(field + " length");
    if (n > left())
      fail(field + " has length " + std::to_string(n) + ", past the end of the file (" + std::to_string(left()) +
               " bytes left)",
           at);
    std::string s(reinterpret_cast<const char*>(p + pos), size_t(n));
    pos += size_t(n);
    return s;
  }
};

bool valid_value_type(uint32_t t) { return t <= uint32_t(GGUFType::F64); }

// Bytes of one number or bool as the file stores it (0 for strings and arrays).
size_t fixed_width(GGUFType t) {
  switch (t) {
    case GGUFType::U8:
    case GGUFType::I8:
    case GGUFType::Bool:
      return 1;
    case GGUFType::U16:
    case GGUFType::I16:
      return 2;
    case GGUFType::U32:
    case GGUFType::I32:
    case GGUFType::F32:
      return 4;
    case GGUFType::U64:
    case GGUFType::I64:
    case GGUFType::F64:
      return 8;
    default:
      return 0;
  }
}

// A scalar value from its bytes in the file (t a fixed-width type).
GGUFValue scalar_from_bytes(GGUFType t, const unsigned char* p) {
  auto get = [p]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  GGUFValue v;
  v.type = t;
  switch (t) {
    case GGUFType::U8:
      v.u = get(uint8_t());
      break;
    case GGUFType::U16:
      v.u = get(uint16_t());
      break;
    case GGUFType::U32:
      v.u = get(uint32_t());
      break;
    case GGUFType::U64:
      v.u = get(uint64_t());
      break;
    case GGUFType::I8:
      v.i = get(int8_t());
      break;
    case GGUFType::I16:
      v.i = get(int16_t());
      break;
    case GGUFType::I32:
      v.i = get(int32_t());
      break;
    case GGUFType::I64:
      v.i = get(int64_t());
      break;
    case GGUFType::F32:
      v.f = get(float());
      break;
    case GGUFType::F64:
      v.f = get(double());
      break;
    case GGUFType::Bool:
      v.b = get(uint8_t()) != 0;
      break;
    default:
      break;
  }
  return v;
}

// Smallest encoding of one element of a type, to bound array counts before reserving.
size_t min_bytes(GGUFType t) {
  if (t == GGUFType::String) return 8;  // its length
  if (t == GGUFType::Array) return 12;  // element type + count
  const size_t w = fixed_width(t);
  return w ? w : 1;
}

GGUFValue read_value(Reader& r, GGUFType t, const std::string& field, int depth) {
  GGUFValue v;
  v.type = t;
  const size_t at = r.pos;
  switch (t) {
    case GGUFType::U8:
      v.u = r.get<uint8_t>(field);
      break;
    case GGUFType::U16:
      v.u = r.get<uint16_t>(field);
      break;
    case GGUFType::U32:
      v.u = r.get<uint32_t>(field);
      break;
    case GGUFType::U64:
      v.u = r.get<uint64_t>(field);
      break;
    case GGUFType::I8:
      v.i = r.get<int8_t>(field);
      break;
    case GGUFType::I16:
      v.i = r.get<int16_t>(field);
      break;
    case GGUFType::I32:
      v.i = r.get<int32_t>(field);
      break;
    case GGUFType::I64:
      v.i = r.get<int64_t>(field);
      break;
    case GGUFType::F32:
      v.f = r.get<float>(field);
      break;
    case GGUFType::F64:
      v.f = r.get<double>(field);
      break;
    case GGUFType::Bool: {
      uint8_t b = r.get<uint8_t>(field);
      if (b > 1) r.fail(field + " is a bool holding " + std::to_string(b) + " (must be 0 or 1)", at);
      v.b = b != 0;
      break;
    }
    case GGUFType::String:
      v.s = r.str(field);
      break;
    case GGUFType::Array: {
      if (depth >= kMaxNesting)
        r.fail(field + " nests arrays deeper than " + std::to_string(kMaxNesting) + " levels", at);
      uint32_t et = r.get<uint32_t>(field + " element type");
      if (!valid_value_type(et))
        r.fail(field + " has unknown array element type " + std::to_string(et) + " (known: 0..12)", at);
      v.elem_type = GGUFType(et);
      const size_t count_at = r.pos;
      uint64_t n = r.get<uint64_t>(field + " element count");
      if (n > r.left() / min_bytes(v.elem_type))
        r.fail(field + " claims " + std::to_string(n) + " elements of " + gguf_type_name(v.elem_type) +
                   ", more than the " + std::to_string(r.left()) + " bytes left can hold",
               count_at);
      if (n == 0) break;
      auto d = std::make_shared<GGUFArray::Data>();
      d->elem = v.elem_type;
      d->n = size_t(n);
      // Element names are built only for a message: a million-element array costs no strings.
      auto elem = [&](uint64_t k) { return field + "[" + std::to_string(k) + "]"; };
      if (const size_t w = fixed_width(v.elem_type)) {
        d->raw.assign(r.p + r.pos, r.p + r.pos + size_t(n) * w);  // fits: n <= left / w was checked
        if (v.elem_type == GGUFType::Bool)
          for (uint64_t k = 0; k < n; ++k)
            if (d->raw[k] > 1)
              r.fail(elem(k) + " is a bool holding " + std::to_string(d->raw[k]) + " (must be 0 or 1)",
                     r.pos + size_t(k));
        r.pos += size_t(n) * w;
      } else if (v.elem_type == GGUFType::String) {
        d->ends.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) {
          const size_t s_at = r.pos;
          if (r.left() < 8) r.need(8, elem(k) + " length");
          uint64_t len;
          std::memcpy(&len, r.p + r.pos, 8);
          r.pos += 8;
          if (len > r.left())
            r.fail(elem(k) + " has length " + std::to_string(len) + ", past the end of the file (" +
                       std::to_string(r.left()) + " bytes left)",
                   s_at);
          d->chars.append(reinterpret_cast<const char*>(r.p + r.pos), size_t(len));
          d->ends.push_back(d->chars.size());
          r.pos += size_t(len);
        }
      } else {
        const size_t start = r.pos;
        d->ends.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) {
          read_value(r, v.elem_type, elem(k), depth + 1);  // validates; the value is read again on access
          d->ends.push_back(r.pos - start);
        }
        d->raw.assign(r.p + start, r.p + r.pos);
      }
      v.array = GGUFArray(std::move(d));
      break;
    }
  }
  return v;
}

[[noreturn]] void wrong(const GGUFValue& v, const char* want) {
  throw Error(ErrorKind::DType,
              std::string("GGUFValue: asked for ") + want + " but the value is " + gguf_type_name(v.type));
}

bool is_unsigned(GGUFType t) {
  return t == GGUFType::U8 || t == GGUFType::U16 || t == GGUFType::U32 || t == GGUFType::U64;
}
bool is_signed(GGUFType t) {
  return t == GGUFType::I8 || t == GGUFType::I16 || t == GGUFType::I32 || t == GGUFType::I64;
}

}  // namespace

const char* gguf_type_name(GGUFType t) {
  static const char* const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "?";
}

uint64_t GGUFValue::as_u64() const {
  if (is_unsigned(type)) return u;
  if (is_signed(type) && i >= 0) return uint64_t(i);
  wrong(*this, "an unsigned integer");
}
int64_t GGUFValue::as_i64() const {
  if (is_signed(type)) return i;
  if (is_unsigned(type) && u <= uint64_t(std::numeric_limits<int64_t>::max())) return int64_t(u);
  wrong(*this, "a signed integer");
}
double GGUFValue::as_f64() const {
  if (type == GGUFType::F32 || type == GGUFType::F64) return f;
  wrong(*this, "a float");
}
bool GGUFValue::as_bool() const {
  if (type == GGUFType::Bool) return b;
  wrong(*this, "a bool");
}
const std::string& GGUFValue::as_string() const {
  if (type == GGUFType::String) return s;
  wrong(*this, "a string");
}
const GGUFArray& GGUFValue::as_array() const {
  if (type == GGUFType::Array) return array;
  wrong(*this, "an array");
}

Shape GGUFTensorInfo::shape() const { return Shape(dims.rbegin(), dims.rend()); }
size_t GGUFTensorInfo::numel() const {
  size_t n = 1;
  for (auto d : dims) n *= size_t(d);  // validated at open not to overflow
  return n;
}

size_t GGUFArray::size() const { return d_ ? d_->n : 0; }
GGUFValue GGUFArray::operator[](size_t i) const {
  if (!d_->values.empty()) return d_->values[i];
  if (d_->elem == GGUFType::Array) {
    static const std::string kNoPath;
    const size_t begin = i == 0 ? 0 : d_->ends[i - 1];
    Reader r{kNoPath, d_->raw.data() + begin, d_->ends[i] - begin};
    return read_value(r, GGUFType::Array, "", 0);  // validated when the file was opened
  }
  if (d_->elem == GGUFType::String) return GGUFValue::of_string(std::string(string_at(i)));
  return scalar_from_bytes(d_->elem, d_->raw.data() + i * fixed_width(d_->elem));
}
GGUFValue GGUFArray::at(size_t i) const {
  if (i >= size())
    throw Error(ErrorKind::Index, "GGUFArray::at: index " + std::to_string(i) + " past the end (" +
                                      std::to_string(size()) + " elements)");
  return (*this)[i];
}
GGUFValue GGUFArray::front() const { return at(0); }
GGUFValue GGUFArray::back() const { return at(size() - 1); }
std::string_view GGUFArray::string_at(size_t i) const {
  if (i >= size())
    throw Error(ErrorKind::Index, "GGUFArray::string_at: index " + std::to_string(i) + " past the end (" +
                                      std::to_string(size()) + " elements)");
  if (!d_->values.empty()) return d_->values[i].as_string();
  if (d_->elem != GGUFType::String)
    throw Error(ErrorKind::DType,
                std::string("GGUFArray::string_at: the array holds ") + gguf_type_name(d_->elem) + ", not strings");
  const size_t begin = i == 0 ? 0 : d_->ends[i - 1];
  return std::string_view(d_->chars).substr(begin, d_->ends[i] - begin);
}
GGUFValue GGUFArray::const_iterator::operator*() const { return (*a_)[i_]; }

struct GGUFFile::Impl {
  std::unique_ptr<io::MappedFile> file;
  uint32_t version = 0;
  size_t alignment = kDefaultAlignment, data_offset = 0;
  std::vector<std::pair<std::string, GGUFValue>> metadata;
  std::unordered_map<std::string_view, size_t> keys;  // views of metadata's keys (reserved, never moved)
  std::vector<GGUFTensorInfo> tensors;
  std::unordered_map<std::string, size_t> index;

  const GGUFTensorInfo& find(const std::string& name, const char* op) const {
    auto it = index.find(name);
    if (it == index.end()) {
      std::string have;
      for (size_t k = 0; k < tensors.size() && k < 8; ++k) have.append(k ? ", " : "").append(tensors[k].name);
      if (tensors.size() > 8) have += ", ...";
      throw Error(ErrorKind::Argument, std::string("GGUFFile::") + op + ": no tensor named '" + name + "' in '" +
                                           file->path() + "' (it holds " + std::to_string(tensors.size()) +
                                           " tensors: " + have + ")");
    }
    return tensors[it->second];
  }

  void parse() {
    Reader r{file->path(), file->data(), file->size()};
    const uint32_t magic = r.get<uint32_t>("magic");
    if (magic != kMagic) r.fail("bad magic: the file does not start with 'GGUF' (not a GGUF file)", 0);
    version = r.get<uint32_t>("version");
    if (version == 1)
      r.fail("GGUF version 1 is not supported (its counts are 32-bit); convert the file with a current llama.cpp", 4);
    if (version != 2 && version != 3) {
      std::string hint = (version & 0xFFFF) == 0 ? " (a big-endian GGUF? wick reads little-endian files only)" : "";
      r.fail("unknown GGUF version " + std::to_string(version) + "; wick reads versions 2 and 3" + hint, 4);
    }
    const size_t tc_at = r.pos;
    const uint64_t n_tensors = r.get<uint64_t>("tensor count");
    const size_t kc_at = r.pos;
    const uint64_t n_kv = r.get<uint64_t>("metadata key-value count");
    // name length 8 + n_dims 4 + type 4 + offset 8; key length 8 + type 4 + value >= 1
    if (n_tensors > r.left() / 24)
      r.fail("tensor count " + std::to_string(n_tensors) + " is more than the file can hold", tc_at);
    if (n_kv > r.left() / 13)
      r.fail("metadata key-value count " + std::to_string(n_kv) + " is more than the file can hold", kc_at);

    metadata.reserve(size_t(n_kv));
    for (uint64_t k = 0; k < n_kv; ++k) {
      const size_t at = r.pos;
      std::string key = r.str("metadata key #" + std::to_string(k));
      const std::string field = "metadata '" + key + "'";
      const size_t type_at = r.pos;
      const uint32_t t = r.get<uint32_t>(field + " type");
      if (!valid_value_type(t))
        r.fail(field + " has unknown value type " + std::to_string(t) + " (known: 0..12)", type_at);
      GGUFValue v = read_value(r, GGUFType(t), field, 0);
      if (keys.count(key)) r.fail("duplicate metadata key '" + key + "'", at);
      if (key == "general.alignment") {
        if (v.type != GGUFType::U32)
          r.fail("general.alignment must be u32, got " + std::string(gguf_type_name(v.type)), type_at);
        if (v.u == 0 || (v.u & (v.u - 1)) != 0)
          r.fail("general.alignment is " + std::to_string(v.u) + ", not a power of two", type_at + 4);
        alignment = size_t(v.u);
      }
      metadata.emplace_back(std::move(key), std::move(v));
      keys.emplace(metadata.back().first, metadata.size() - 1);
    }

    tensors.reserve(size_t(n_tensors));
    std::vector<size_t> info_at;
    for (uint64_t k = 0; k < n_tensors; ++k) {
      const size_t at = r.pos;
      info_at.push_back(at);
      GGUFTensorInfo ti;
      ti.name = r.str("tensor #" + std::to_string(k) + " name");
      const std::string field = "tensor '" + ti.name + "'";
      const size_t nd_at = r.pos;
      const uint32_t nd = r.get<uint32_t>(field + " dimension count");
      if (nd > kMaxDims)
        r.fail(field + " has " + std::to_string(nd) + " dimensions; GGUF allows at most " + std::to_string(kMaxDims),
               nd_at);
      // The product of the non-zero dims must fit too, even when a zero dim makes the tensor
      // empty: strides are that large (the fuzzer found [2^44 + 1, 0, 2^43], which load() refused).
      uint64_t numel = 1, span = 1;
      for (uint32_t d = 0; d < nd; ++d) {
        const size_t d_at = r.pos;
        uint64_t n = r.get<uint64_t>(field + " dimension " + std::to_string(d));
        if (n > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, n, &numel) ||
            __builtin_mul_overflow(span, n ? n : 1, &span) || span > uint64_t(std::numeric_limits<int64_t>::max()))
          r.fail(field + " dimensions overflow the element count at dimension " + std::to_string(d), d_at);
        ti.dims.push_back(n);
      }
      const size_t type_at = r.pos;
      const uint32_t type = r.get<uint32_t>(field + " type");
      const TypeInfo* tinfo = type_info(type);
      if (!tinfo) {
        // A type ggml defines but wick does not compute with (IQ2_XXS, TQ1_0, ...) is named.
        const quant::GGMLTypeInfo* known = quant::ggml_type_info(type);
        r.fail(field +
                   (known ? " has ggml type " + std::string(known->name) + " (id " + std::to_string(type) +
                                "), which wick does not support"
                          : " has unknown ggml type id " + std::to_string(type)) +
                   "; wick supports " + supported_list(),
               type_at);
      }
      ti.type = tinfo->type;
      const size_t off_at = r.pos;
      ti.offset = r.get<uint64_t>(field + " offset");
      const uint64_t row = nd ? ti.dims[0] : 1;
      if (row % tinfo->block)
        r.fail(field + " is " + tinfo->name + " with a row of " + std::to_string(row) +
                   " elements, not a multiple of its block size " + std::to_string(tinfo->block),
               nd_at + 4);
      uint64_t bytes;
      if (__builtin_mul_overflow(numel / tinfo->block, uint64_t(tinfo->bytes), &bytes))
        r.fail(field + " byte size overflows", nd_at);
      ti.nbytes = size_t(bytes);
      if (ti.offset % alignment)
        r.fail(field + " offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                   std::to_string(alignment),
               off_at);
      if (!index.emplace(ti.name, tensors.size()).second) r.fail("duplicate tensor name '" + ti.name + "'", at);
      tensors.push_back(std::move(ti));
    }

    data_offset = r.pos + (alignment - r.pos % alignment) % alignment;
    if (tensors.empty()) return;
    if (data_offset > r.size)
      r.fail(
          "the data section starts at byte " + std::to_string(data_offset) + ", past the end of the file (truncated)",
          r.pos);
    const uint64_t data_size = r.size - data_offset;
    std::vector<size_t> order(tensors.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
    uint64_t end = 0;
    const GGUFTensorInfo* prev = nullptr;
    for (size_t k : order) {
      const auto& t = tensors[k];
      const size_t off_at = info_at[k] + 8 + t.name.size() + 4 + 8 * t.dims.size() + 4;
      if (t.offset > data_size || t.nbytes > data_size - t.offset)
        r.fail("tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                   ") runs past the end of the data section (" + std::to_string(data_size) + " bytes; truncated file)",
               off_at);
      // An empty tensor occupies no bytes: gguf-py (and save_gguf) put it at the next one's offset.
      if (t.nbytes == 0) continue;
      if (prev && t.offset < end)
        r.fail("tensor '" + t.name + "' data at offset " + std::to_string(t.offset) + " overlaps tensor '" +
                   prev->name + "', which ends at " + std::to_string(end),
               off_at);
      end = t.offset + t.nbytes;
      prev = &t;
    }
  }
};

GGUFFile GGUFFile::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->file = std::make_unique<io::MappedFile>(path);
  impl->parse();
  GGUFFile f;
  f.impl_ = std::move(impl);
  return f;
}

uint32_t GGUFFile::version() const { return impl_->version; }
size_t GGUFFile::alignment() const { return impl_->alignment; }
size_t GGUFFile::data_offset() const { return impl_->data_offset; }
const std::vector<std::pair<std::string, GGUFValue>>& GGUFFile::metadata() const { return impl_->metadata; }
const GGUFValue* GGUFFile::find(const std::string& key) const {
  auto it = impl_->keys.find(key);
  return it == impl_->keys.end() ? nullptr : &impl_->metadata[it->second].second;
}
const std::vector<GGUFTensorInfo>& GGUFFile::tensors() const { return impl_->tensors; }
bool GGUFFile::contains(const std::string& name) const { return impl_->index.count(name) != 0; }
const GGUFTensorInfo& GGUFFile::tensor(const std::string& name) const { return impl_->find(name, "tensor"); }

std::pair<const unsigned char*, size_t> GGUFFile::raw(const std::string& name) const {
  const auto& t = impl_->find(name, "raw");
  return {impl_->file->data() + impl_->data_offset + t.offset, t.nbytes};
}

Tensor GGUFFile::load(const std::string& name, Device device) const {
  const auto& t = impl_->find(name, "load");
  const TypeInfo& ti = info(t.type);
  if (!ti.plain)
    throw Error(ErrorKind::Unsupported, "GGUFFile::load: tensor '" + name + "' in '" + impl_->file->path() + "' is " +
                                            ti.name +
                                            ", a quantized type; load it with load_quantized() (and dequantize() "
                                            "it for a float Tensor)");
  return Tensor::from_data(impl_->file->data() + impl_->data_offset + t.offset, t.shape(), ti.dtype, device);
}

QTensor GGUFFile::load_quantized(const std::string& name, Device device) const {
  const auto& t = impl_->find(name, "load_quantized");
  const TypeInfo& ti = info(t.type);
  if (ti.plain || !ggml_type_supported(t.type))
    throw Error(ErrorKind::Unsupported, "GGUFFile::load_quantized: tensor '" + name + "' in '" + impl_->file->path() +
                                            "' is " + ti.name + ", not a quantized block type; " +
                                            (ti.plain ? "load it with load()" : "supported: " + ggml_supported_types()));
  const unsigned char* p = impl_->file->data() + impl_->data_offset + t.offset;
  if (device.is_cpu()) {
    // Zero copy: the blocks stay in the mapping, which this storage keeps alive.
    std::shared_ptr<const void> owner(impl_, impl_.get());
    return QTensor(registry::cpu_borrow(p, t.nbytes, DType::U8, std::move(owner)), t.type, t.shape(), device);
  }
  return QTensor::from_bytes(t.type, t.shape(), p, t.nbytes, device);
}

GGUFValue GGUFValue::of_u8(uint8_t v) {
  GGUFValue x;
  x.type = GGUFType::U8;
  x.u = v;
  return x;
}
GGUFValue GGUFValue::of_u16(uint16_t v) {
  GGUFValue x;
  x.type = GGUFType::U16;
  x.u = v;
  return x;
}
GGUFValue GGUFValue::of_u32(uint32_t v) {
  GGUFValue x;
  x.type = GGUFType::U32;
  x.u = v;
  return x;
}
GGUFValue GGUFValue::of_u64(uint64_t v) {
  GGUFValue x;
  x.type = GGUFType::U64;
  x.u = v;
  return x;
}
GGUFValue GGUFValue::of_i8(int8_t v) {
  GGUFValue x;
  x.type = GGUFType::I8;
  x.i = v;
  return x;
}
GGUFValue GGUFValue::of_i16(int16_t v) {
  GGUFValue x;
  x.type = GGUFType::I16;
  x.i = v;
  return x;
}
GGUFValue GGUFValue::of_i32(int32_t v) {
  GGUFValue x;
  x.type = GGUFType::I32;
  x.i = v;
  return x;
}
GGUFValue GGUFValue::of_i64(int64_t v) {
  GGUFValue x;
  x.type = GGUFType::I64;
  x.i = v;
  return x;
}
GGUFValue GGUFValue::of_f32(float v) {
  GGUFValue x;
  x.type = GGUFType::F32;
  x.f = v;
  return x;
}
GGUFValue GGUFValue::of_f64(double v) {
  GGUFValue x;
  x.type = GGUFType::F64;
  x.f = v;
  return x;
}
GGUFValue GGUFValue::of_bool(bool v) {
  GGUFValue x;
  x.type = GGUFType::Bool;
  x.b = v;
  return x;
}
GGUFValue GGUFValue::of_string(std::string v) {
  GGUFValue x;
  x.type = GGUFType::String;
  x.s = std::move(v);
  return x;
}
GGUFValue GGUFValue::of_array(GGUFType elem_type, std::vector<GGUFValue> elems) {
  GGUFValue x;
  x.type = GGUFType::Array;
  x.elem_type = elem_type;
  if (elems.empty()) return x;
  auto d = std::make_shared<GGUFArray::Data>();
  d->elem = elem_type;
  d->n = elems.size();
  // Compact when every element is of elem_type and fits it; otherwise the elements are kept as given,
  // for save_gguf to name what is wrong.
  const size_t w = fixed_width(elem_type);
  bool compact = elem_type == GGUFType::String || w > 0;
  for (const GGUFValue& e : elems) {
    if (!compact) break;
    compact = e.type == elem_type;
    if (compact && w > 0 && w < 8) {
      if (is_unsigned(elem_type)) compact = (e.u >> (8 * w)) == 0;
      if (is_signed(elem_type)) {
        const int64_t lim = int64_t(1) << (8 * w - 1);
        compact = e.i >= -lim && e.i < lim;
      }
    }
  }
  if (!compact) {
    d->values = std::move(elems);
  } else if (elem_type == GGUFType::String) {
    d->ends.reserve(elems.size());
    for (const GGUFValue& e : elems) {
      d->chars += e.s;
      d->ends.push_back(d->chars.size());
    }
  } else {
    d->raw.resize(elems.size() * w);
    for (size_t k = 0; k < elems.size(); ++k) {
      const GGUFValue& e = elems[k];
      unsigned char* p = d->raw.data() + k * w;
      auto put_at = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
      switch (elem_type) {
        case GGUFType::U8:
          put_at(uint8_t(e.u));
          break;
        case GGUFType::U16:
          put_at(uint16_t(e.u));
          break;
        case GGUFType::U32:
          put_at(uint32_t(e.u));
          break;
        case GGUFType::U64:
          put_at(e.u);
          break;
        case GGUFType::I8:
          put_at(int8_t(e.i));
          break;
        case GGUFType::I16:
          put_at(int16_t(e.i));
          break;
        case GGUFType::I32:
          put_at(int32_t(e.i));
          break;
        case GGUFType::I64:
          put_at(e.i);
          break;
        case GGUFType::F32:
          put_at(float(e.f));
          break;
        case GGUFType::F64:
          put_at(e.f);
          break;
        case GGUFType::Bool:
          put_at(uint8_t(e.b ? 1 : 0));
          break;
        default:
          break;
      }
    }
  }
  x.array = GGUFArray(std::move(d));
  return x;
}

namespace {

[[noreturn]] void bad_arg(const std::string& what) { throw Error(ErrorKind::Argument, "save_gguf: " + what); }

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

template <class T>
T narrow_int(const GGUFValue& v, const std::string& key) {
  if constexpr (std::is_signed_v<T>) {
    if (v.i < int64_t(std::numeric_limits<T>::min()) || v.i > int64_t(std::numeric_limits<T>::max()))
      bad_arg("metadata '" + key + "': " + std::to_string(v.i) + " does not fit " + gguf_type_name(v.type));
    return T(v.i);
  } else {
    if (v.u > uint64_t(std::numeric_limits<T>::max()))
      bad_arg("metadata '" + key + "': " + std::to_string(v.u) + " does not fit " + gguf_type_name(v.type));
    return T(v.u);
  }
}

// The value without its type tag (gguf-py's _pack_val with add_vtype=False).
void put_value(std::string& out, const GGUFValue& v, const std::string& key, int depth) {
  switch (v.type) {
    case GGUFType::U8:
      put(out, narrow_int<uint8_t>(v, key));
      break;
    case GGUFType::U16:
      put(out, narrow_int<uint16_t>(v, key));
      break;
    case GGUFType::U32:
      put(out, narrow_int<uint32_t>(v, key));
      break;
    case GGUFType::U64:
      put(out, v.u);
      break;
    case GGUFType::I8:
      put(out, narrow_int<int8_t>(v, key));
      break;
    case GGUFType::I16:
      put(out, narrow_int<int16_t>(v, key));
      break;
    case GGUFType::I32:
      put(out, narrow_int<int32_t>(v, key));
      break;
    case GGUFType::I64:
      put(out, v.i);
      break;
    case GGUFType::F32:
      put(out, float(v.f));
      break;
    case GGUFType::F64:
      put(out, v.f);
      break;
    case GGUFType::Bool:
      put<uint8_t>(out, v.b ? 1 : 0);
      break;
    case GGUFType::String:
      put_str(out, v.s);
      break;
    case GGUFType::Array:
      if (depth >= kMaxNesting)
        bad_arg("metadata '" + key + "' nests arrays deeper than " + std::to_string(kMaxNesting));
      if (!valid_value_type(uint32_t(v.elem_type)))
        bad_arg("metadata '" + key + "' has unknown array element type " + std::to_string(uint32_t(v.elem_type)));
      put<uint32_t>(out, uint32_t(v.elem_type));
      put<uint64_t>(out, v.array.size());
      if (const GGUFArray::Data* d = v.array.data(); d && d->values.empty()) {  // compact: of elem_type
        if (d->elem == GGUFType::String) {
          for (size_t k = 0; k < d->n; ++k) {
            const std::string_view e = v.array.string_at(k);
            put<uint64_t>(out, e.size());
            out.append(e);
          }
        } else {
          out.append(reinterpret_cast<const char*>(d->raw.data()), d->raw.size());
        }
        break;
      }
      for (const auto& e : v.array) {
        if (e.type != v.elem_type)
          bad_arg("metadata '" + key + "' is an array of " + gguf_type_name(v.elem_type) + " holding a " +
                  gguf_type_name(e.type));
        put_value(out, e, key, depth + 1);
      }
      break;
    default:
      bad_arg("metadata '" + key + "' has unknown value type " + std::to_string(uint32_t(v.type)));
  }
}

GGMLType ggml_of(DType d, const std::string& name) {
  if (std::optional<GGMLType> g = ggml_type_of(d)) return *g;
  throw Error(ErrorKind::DType, "save_gguf: tensor '" + name + "' is " + dtype_name(d) +
                                    ", which GGUF cannot store; convert it to f32, f16, bf16, f64, i16, i32 or i64");
}

}  // namespace

void save_gguf(const std::string& path, const std::vector<std::pair<std::string, GGUFValue>>& metadata,
               const std::vector<std::pair<std::string, Tensor>>& tensors, const std::vector<GGUFRawTensor>& raw) {
  size_t alignment = kDefaultAlignment;
  std::string head;
  put<uint32_t>(head, kMagic);
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors.size() + raw.size());
  put<uint64_t>(head, metadata.size());
  std::unordered_set<std::string> seen;
  for (const auto& [key, v] : metadata) {
    if (!seen.insert(key).second) bad_arg("metadata key '" + key + "' is given twice");
    if (key == "general.alignment") {
      if (v.type != GGUFType::U32 || v.u == 0 || v.u > 0xFFFFFFFFu || (v.u & (v.u - 1)) != 0)
        bad_arg("general.alignment must be a u32 power of two");
      alignment = size_t(v.u);
    }
    put_str(head, key);
    put<uint32_t>(head, uint32_t(v.type));
    put_value(head, v, key, 0);
  }

  struct Item {
    std::string name;
    GGMLType type;
    std::vector<uint64_t> dims;
    size_t nbytes;
    const Tensor* t;
    const GGUFRawTensor* r;
  };
  std::vector<Item> items;
  seen.clear();
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) bad_arg("tensor '" + name + "' is undefined");
    Item it{name, ggml_of(t.dtype(), name), {}, 0, &t, nullptr};
    const Shape& sh = t.shape();
    if (sh.size() > kMaxDims)
      bad_arg("tensor '" + name + "' has " + std::to_string(sh.size()) + " dimensions; GGUF allows at most 4");
    it.dims.assign(sh.rbegin(), sh.rend());
    it.nbytes = t.numel() * dtype_size(t.dtype());
    items.push_back(std::move(it));
  }
  for (const auto& r : raw) {
    const TypeInfo* ti = type_info(uint32_t(r.type));
    if (!ti) bad_arg("tensor '" + r.name + "' has unknown ggml type id " + std::to_string(uint32_t(r.type)));
    if (r.dims.size() > kMaxDims)
      bad_arg("tensor '" + r.name + "' has " + std::to_string(r.dims.size()) + " dimensions; GGUF allows at most 4");
    uint64_t n = 1;
    for (auto d : r.dims)
      if (__builtin_mul_overflow(n, d, &n)) bad_arg("tensor '" + r.name + "' element count overflows");
    if ((r.dims.empty() ? 1 : r.dims[0]) % ti->block)
      bad_arg("tensor '" + r.name + "' is " + ti->name + " with rows of " +
              std::to_string(r.dims.empty() ? 1 : r.dims[0]) + " elements, not a multiple of its block size " +
              std::to_string(ti->block));
    if (n / ti->block * ti->bytes != r.bytes.size())
      bad_arg("tensor '" + r.name + "' is " + ti->name + " with " + std::to_string(n) + " elements = " +
              std::to_string(n / ti->block * ti->bytes) + " bytes, but holds " + std::to_string(r.bytes.size()));
    items.push_back({r.name, r.type, r.dims, r.bytes.size(), nullptr, &r});
  }
  auto padded = [&](size_t n) { return n + (alignment - n % alignment) % alignment; };
  size_t offset = 0;
  for (const auto& it : items) {
    if (!seen.insert(it.name).second) bad_arg("tensor name '" + it.name + "' is given twice");
    put_str(head, it.name);
    put<uint32_t>(head, uint32_t(it.dims.size()));
    for (auto d : it.dims) put<uint64_t>(head, d);
    put<uint32_t>(head, uint32_t(it.type));
    put<uint64_t>(head, offset);
    offset += padded(it.nbytes);
  }
  head.append(padded(head.size()) - head.size(), '\0');

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(ErrorKind::Io, "save_gguf: cannot open '" + path + "' for writing: " + std::strerror(errno));
  f.write(head.data(), std::streamsize(head.size()));
  std::vector<char> buf;
  for (const auto& it : items) {
    buf.assign(padded(it.nbytes), '\0');
    if (it.t)
      it.t->copy_to_host(buf.data());  // contiguous row-major, from any device
    else if (it.nbytes)  // an empty vector's data() may be null, which memcpy must not get
      std::memcpy(buf.data(), it.r->bytes.data(), it.nbytes);
    f.write(buf.data(), std::streamsize(buf.size()));
  }
  f.close();
  if (!f) throw Error(ErrorKind::Io, "save_gguf: writing '" + path + "' failed (disk full?)");
}

}  // namespace wick
