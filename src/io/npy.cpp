// NumPy .npy (format versions 1.0, 2.0, 3.0). bf16 and f8e4m3 use the ml_dtypes names
// 'bfloat16' and 'float8_e4m3fn' as descr, which numpy reads once ml_dtypes is imported.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/checks.hpp"
#include "io/mmap.hpp"
#include "wick/io.hpp"

static_assert(std::endian::native == std::endian::little, "wick's file readers assume a little-endian host");

namespace wick {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::Io, "npy file '" + path + "': " + what);
}

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& s, const std::string& path) : s_(s), path_(path) {}

  Header parse() {
    Header h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = string_lit();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail("descr must be a simple type string; structured dtypes (lists of fields) are not supported");
        h.descr = string_lit();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        seen_fortran = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen_shape = true;
      } else {
        fail("unexpected key '" + key + "' (numpy writes exactly descr, fortran_order, shape)");
      }
      skip_ws();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    ++i_;
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the closing '}'");
    if (!seen_descr || !seen_fortran || !seen_shape) fail("header lacks one of descr, fortran_order, shape");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { bad(path_, "malformed header (" + what + "): " + s_); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_lit() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    if (out.find('\\') != std::string::npos) fail("escapes in strings are not supported");
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) return i_ += 4, true;
    if (s_.compare(i_, 5, "False") == 0) return i_ += 5, false;
    fail("fortran_order must be True or False");
  }
  Shape tuple() {
    Shape out;
    if (peek() != '(') fail("shape must be a tuple");
    ++i_;
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("shape entries must be non-negative integers");
      size_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(v, size_t(10), &v) || __builtin_add_overflow(v, size_t(peek() - '0'), &v))
          fail("shape entry overflows");
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long
      out.push_back(v);
      skip_ws();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in shape");
    }
    ++i_;
    return out;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

struct Descr {
  DType dtype;
  bool swap;   // big-endian on disk
  bool boolean;
};

Descr parse_descr(const std::string& d, const std::string& path) {
  if (d == "bfloat16") return {DType::BF16, false, false};
  if (d == "float8_e4m3fn") return {DType::F8E4M3, false, false};
  char order = d.empty() ? '\0' : d[0];
  std::string code = (order == '<' || order == '>' || order == '|' || order == '=') ? d.substr(1) : d;
  struct Known {
    const char* code;
    DType dtype;
    bool boolean;
  };
  static const Known kKnown[] = {{"b1", DType::U8, true},  {"u1", DType::U8, false},  {"u4", DType::U32, false},
                                 {"i2", DType::I16, false}, {"i4", DType::I32, false}, {"i8", DType::I64, false},
                                 {"f2", DType::F16, false}, {"f4", DType::F32, false}, {"f8", DType::F64, false}};
  for (const auto& k : kKnown)
    if (code == k.code) return {k.dtype, order == '>' && dtype_size(k.dtype) > 1, k.boolean};
  bad(path, "descr '" + d +
                "' has no wick dtype; wick reads |b1 |u1 u4 i2 i4 i8 f2 f4 f8 (either byte order), 'bfloat16' and "
                "'float8_e4m3fn': convert the array with .astype() before saving");
}

}  // namespace

Tensor load_npy(const std::string& path, Device device) {
  io::MappedFile f(path);
  const unsigned char* p = f.data();
  const size_t size = f.size();
  if (size < 10 || std::memcmp(p, kMagic, 6) != 0) bad(path, "not a .npy file (missing the \\x93NUMPY magic)");
  const int major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0)
    bad(path, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                  " is not supported (wick reads 1.0, 2.0 and 3.0)");
  size_t len_bytes = major == 1 ? 2 : 4, hlen = 0;
  if (size < 8 + len_bytes) bad(path, "truncated before the header length");
  for (size_t i = 0; i < len_bytes; ++i) hlen |= size_t(p[8 + i]) << (8 * i);
  const size_t data_start = 8 + len_bytes + hlen;
  if (data_start > size)
    bad(path, "header length " + std::to_string(hlen) + " runs past the end of the file (" + std::to_string(size) +
                  " bytes): truncated");
  const std::string text(reinterpret_cast<const char*>(p) + 8 + len_bytes, hlen);
  Header h = HeaderParser(text, path).parse();
  Descr d = parse_descr(h.descr, path);

  const size_t es = dtype_size(d.dtype);
  size_t n = 0, bytes;
  try {
    n = checked_numel(h.shape, "load_npy");  // also bounds the other dims when one dim is 0
  } catch (const Error&) {
    bad(path, "shape " + shape_str(h.shape) + " overflows");
  }
  if (__builtin_mul_overflow(n, es, &bytes)) bad(path, "shape " + shape_str(h.shape) + " overflows");
  if (bytes != size - data_start)
    bad(path, "shape " + shape_str(h.shape) + " of '" + h.descr + "' needs " + std::to_string(bytes) +
                  " data bytes but the file holds " + std::to_string(size - data_start) +
                  (bytes > size - data_start ? " (truncated)" : " (trailing bytes)"));

  const unsigned char* src = p + data_start;
  std::vector<unsigned char> fixed;
  if (d.swap || d.boolean) {
    fixed.assign(src, src + bytes);
    if (d.swap)
      for (size_t i = 0; i < bytes; i += es) std::reverse(fixed.begin() + i, fixed.begin() + i + es);
    if (d.boolean)
      for (auto& b : fixed) b = b ? 1 : 0;
    src = fixed.data();
  }
  if (!h.fortran || h.shape.size() < 2) return Tensor::from_data(src, h.shape, d.dtype, device);
  // Column-major data is the row-major tensor of the reversed shape, transposed back.
  Shape rev(h.shape.rbegin(), h.shape.rend());
  std::vector<int64_t> order;
  for (int64_t i = int64_t(rev.size()) - 1; i >= 0; --i) order.push_back(i);
  Tensor t = Tensor::from_data(src, rev, d.dtype, Device::cpu()).permute(order).contiguous();
  return t.to_device(device);
}

void save_npy(const Tensor& t, const std::string& path) {
  check_defined(t, "save_npy");
  const char* descr = nullptr;
  switch (t.dtype()) {
    case DType::U8: descr = "'|u1'"; break;
    case DType::U32: descr = "'<u4'"; break;
    case DType::I16: descr = "'<i2'"; break;
    case DType::I32: descr = "'<i4'"; break;
    case DType::I64: descr = "'<i8'"; break;
    case DType::F16: descr = "'<f2'"; break;
    case DType::F32: descr = "'<f4'"; break;
    case DType::F64: descr = "'<f8'"; break;
    case DType::BF16: descr = "'bfloat16'"; break;
    case DType::F8E4M3: descr = "'float8_e4m3fn'"; break;
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape.append(std::to_string(t.shape()[i])).append(", ");
  if (t.rank() > 1) shape.resize(shape.size() - 2);
  else if (t.rank() == 1) shape.pop_back();  // "(3,)"
  shape += ")";
  std::string h = std::string("{'descr': ") + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
  // numpy pads with spaces and a final newline so that the data starts 64-byte aligned.
  const std::string dict = h;
  auto padded = [&dict](size_t prefix) {
    std::string s = dict;
    s.append((64 - (prefix + s.size() + 1) % 64) % 64, ' ');
    return s + '\n';
  };
  size_t prefix = 10;  // version 1.0 has a 2-byte header length; 2.0 a 4-byte one
  h = padded(prefix);
  if (h.size() > 65535) h = padded(prefix = 12);
  std::string head(kMagic, 6);
  head += char(prefix == 10 ? 1 : 2);
  head += char(0);
  for (size_t i = 0; i < prefix - 8; ++i) head += char((h.size() >> (8 * i)) & 0xff);

  const size_t bytes = checked_bytes(t.numel(), dtype_size(t.dtype()), "save_npy");
  check_host_alloc(bytes, "save_npy");
  std::vector<char> data(bytes);
  t.copy_to_host(data.data());  // contiguous row-major, from any device
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(ErrorKind::Io, "save_npy: cannot open '" + path + "' for writing: " + std::strerror(errno));
  f.write(head.data(), std::streamsize(head.size()));
  f.write(h.data(), std::streamsize(h.size()));
  f.write(data.data(), std::streamsize(data.size()));
  f.close();
  if (!f) throw Error(ErrorKind::Io, "save_npy: writing '" + path + "' failed (disk full?)");
}

}  // namespace wick
