#pragma once
// GGUF (llama.cpp's model file), versions 2 and 3: memory-mapped and lazy like SafeTensors.
// The header, metadata and tensor infos are parsed and validated at open; a tensor's bytes stay
// a span into the mapping until load() or raw() asks for them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wick/quant.hpp"
#include "wick/tensor.hpp"

namespace wick {

// Metadata value types, numbered as the GGUF spec (GGUFValueType).
enum class GGUFType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* gguf_type_name(GGUFType t);

struct GGUFValue;

// The elements of an array value, held compactly: numbers at their width in the file, strings as
// strings, nested arrays as values, so that metadata costs about what the file spends on it (an
// array of a million u8 takes a megabyte, not a million GGUFValues). Read-only; elements come out
// as GGUFValues by value. Copies share the elements.
class GGUFArray {
 public:
  GGUFArray() = default;
  size_t size() const;
  bool empty() const { return size() == 0; }
  GGUFValue operator[](size_t i) const;  // unchecked index, as std::vector
  GGUFValue at(size_t i) const;          // Error(Index) past the end
  GGUFValue front() const;
  GGUFValue back() const;
  // Element i of a string array, without a copy; Error(DType) for another element type.
  std::string_view string_at(size_t i) const;

  class const_iterator {
   public:
    using value_type = GGUFValue;
    using difference_type = std::ptrdiff_t;
    const_iterator() = default;
    GGUFValue operator*() const;
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator t = *this;
      ++i_;
      return t;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_ && a_ == o.a_; }

   private:
    friend class GGUFArray;
    const_iterator(const GGUFArray* a, size_t i) : a_(a), i_(i) {}
    const GGUFArray* a_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  struct Data;
  explicit GGUFArray(std::shared_ptr<const Data> d) : d_(std::move(d)) {}
  const Data* data() const { return d_.get(); }

 private:
  std::shared_ptr<const Data> d_;  // null: empty
};

// One metadata value. Integers are held widened (u for unsigned types, i for signed), floats in
// f, bool in b; an Array holds its element type and elements (which may be arrays themselves).
struct GGUFValue {
  GGUFType type = GGUFType::U8;
  GGUFType elem_type = GGUFType::U8;  // for Array
  bool b = false;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  GGUFArray array;

  // Checked reads: Error(DType) naming both types when the value is of another kind.
  uint64_t as_u64() const;  // any unsigned type, or a non-negative signed one
  int64_t as_i64() const;   // any integer type that fits
  double as_f64() const;    // f32/f64
  bool as_bool() const;
  const std::string& as_string() const;
  const GGUFArray& as_array() const;

  // Builders for writing.
  static GGUFValue of_u8(uint8_t v);
  static GGUFValue of_i8(int8_t v);
  static GGUFValue of_u16(uint16_t v);
  static GGUFValue of_i16(int16_t v);
  static GGUFValue of_u32(uint32_t v);
  static GGUFValue of_i32(int32_t v);
  static GGUFValue of_u64(uint64_t v);
  static GGUFValue of_i64(int64_t v);
  static GGUFValue of_f32(float v);
  static GGUFValue of_f64(double v);
  static GGUFValue of_bool(bool v);
  static GGUFValue of_string(std::string v);
  static GGUFValue of_array(GGUFType elem_type, std::vector<GGUFValue> elems);  // each of elem_type
};

struct GGUFTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
  GGMLType type = GGMLType::F32;
  uint64_t offset = 0;  // from the start of the data section
  size_t nbytes = 0;
  Shape shape() const;  // row-major (dims reversed), as gguf-py's reader and NumPy show it
  size_t numel() const;
};

class GGUFFile {
 public:
  // Malformed input of any kind is Error(Io) naming the field and its byte offset.
  static GGUFFile open(const std::string& path);
  uint32_t version() const;
  size_t alignment() const;    // general.alignment, default 32
  size_t data_offset() const;  // byte offset of the data section in the file
  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const;  // in file order
  const GGUFValue* find(const std::string& key) const;                     // null when absent
  const std::vector<GGUFTensorInfo>& tensors() const;                      // in file order
  bool contains(const std::string& name) const;
  const GGUFTensorInfo& tensor(const std::string& name) const;  // Error(Argument) when absent
  // The tensor's bytes exactly as stored (blocks for quantized types), inside the mapping, which
  // lives while any copy of this GGUFFile does.
  std::pair<const unsigned char*, size_t> raw(const std::string& name) const;
  // F32/F16/BF16 (and F64/I16/I32/I64) as a Tensor of the row-major shape; a quantized or I8
  // tensor is Error(Unsupported) naming its type.
  Tensor load(const std::string& name, Device device = Device::cpu()) const;
  // A quantized tensor (Q4_0 ... MXFP4) as a QTensor: on the CPU its blocks stay in the mapping
  // (no copy), on a GPU they are uploaded once. Error(Unsupported) for a plain type (use load()).
  QTensor load_quantized(const std::string& name, Device device = Device::cpu()) const;

  struct Impl;

 private:
  GGUFFile() = default;
  std::shared_ptr<Impl> impl_;
};

// A tensor to write as stored bytes: a quantized one (blocks as ggml lays them out) or any type.
struct GGUFRawTensor {
  std::string name;
  GGMLType type = GGMLType::F32;
  std::vector<uint64_t> dims;  // ggml order (innermost first)
  std::vector<unsigned char> bytes;
};

// Writes a GGUF v3 file as gguf-py's GGUFWriter does, byte for byte: metadata in the given order,
// then `tensors` (F32/F16/BF16/F64/I16/I32/I64, any layout or device; dims are the shape
// reversed) followed by `raw`, each tensor's data padded to the alignment (general.alignment when
// the metadata holds it, else 32). Bad input (a value whose fields disagree with its type, a
// tensor of a dtype GGUF lacks, raw bytes of the wrong size, a name twice) is Error(Argument) or
// Error(DType) before the file is opened.
void save_gguf(const std::string& path, const std::vector<std::pair<std::string, GGUFValue>>& metadata,
               const std::vector<std::pair<std::string, Tensor>>& tensors, const std::vector<GGUFRawTensor>& raw = {});

}  // namespace wick
