// Convolution, pooling and resampling: every shape and parameter is checked here (PyTorch's
// rules) so that a backend only ever sees valid, non-overflowing sizes.
#include <cmath>
#include <new>
#include <stdexcept>
#include <string>

#include "core/checks.hpp"

namespace wick {
namespace {

std::string operands(const Tensor& x, const Tensor& w) { return "input " + describe(x) + ", kernel " + describe(w); }

void check_pair(const Tensor& x, const Tensor& w, size_t rank, const char* op, const char* layout) {
  check_same_device(x, w, op);
  check_same_dtype(x, w, op);
  if (x.rank() != rank || w.rank() != rank)
    throw Error(ErrorKind::Shape, std::string(op) + ": input and kernel must both have rank " + std::to_string(rank) +
                                      " (" + layout + "), got " + operands(x, w) +
                                      "; add a batch dim with unsqueeze(0) if needed");
}

// The output size of one spatial dim, checked; `what` names the dim for messages.
size_t out_size(const char* op, const char* what, const Tensor& x, const Tensor& w, size_t in, size_t k, size_t pad,
                size_t stride, size_t dil, size_t out_pad, bool transposed) {
  const std::string ctx = std::string(op) + " (" + what + "): ";
  if (stride == 0) throw Error(ErrorKind::Argument, ctx + "stride must be at least 1 (" + operands(x, w) + ")");
  if (dil == 0) throw Error(ErrorKind::Argument, ctx + "dilation must be at least 1 (" + operands(x, w) + ")");
  if (k == 0) throw Error(ErrorKind::Shape, ctx + "the kernel has size 0 (" + operands(x, w) + "); use a kernel of size >= 1");
  using I = __int128;
  const I eff = I(dil) * (I(k) - 1) + 1;  // span of the dilated kernel
  I out;
  if (!transposed) {
    if (out_pad != 0)
      throw Error(ErrorKind::Argument, ctx + "output_padding = " + std::to_string(out_pad) +
                                           " only applies to transposed convolutions; set it to 0");
    const I padded = I(in) + 2 * I(pad);
    if (padded < eff)
      throw Error(ErrorKind::Shape, ctx + "the dilated kernel spans " + std::to_string(int64_t(eff)) +
                                        " but the padded input is only " + std::to_string(int64_t(padded)) + " (" +
                                        operands(x, w) + ", padding " + std::to_string(pad) +
                                        "); use a smaller kernel or dilation, or more padding");
    out = (padded - eff) / I(stride) + 1;
  } else {
    if (out_pad >= stride && out_pad >= dil)
      throw Error(ErrorKind::Argument, ctx + "output_padding " + std::to_string(out_pad) +
                                           " must be smaller than the stride (" + std::to_string(stride) +
                                           ") or the dilation (" + std::to_string(dil) + "), as in PyTorch");
    if (in == 0)
      throw Error(ErrorKind::Shape, ctx + "the input has size 0 along this dim (" + operands(x, w) +
                                        "); transposed convolutions need a non-empty input");
    out = (I(in) - 1) * I(stride) - 2 * I(pad) + eff + I(out_pad);
    if (out < 1)
      throw Error(ErrorKind::Shape, ctx + "the output size would be " + std::to_string(int64_t(out)) + " (" +
                                        operands(x, w) + ", padding " + std::to_string(pad) +
                                        "); reduce the padding");
  }
  if (out > (I(1) << 48))
    throw Error(ErrorKind::Shape, ctx + "the output size is too large (" + operands(x, w) + ")");
  return size_t(out);
}

// Returns c_out. Conv kernels are (c_out, c_in/groups, ...); transposed ones (c_in, c_out/groups, ...).
size_t check_channels(const char* op, const Tensor& x, const Tensor& w, size_t groups, bool transposed) {
  if (groups == 0) throw Error(ErrorKind::Argument, std::string(op) + ": groups must be at least 1");
  const size_t c_in = x.shape()[1];
  if (c_in % groups != 0)
    throw Error(ErrorKind::Shape, std::string(op) + ": input channels (" + std::to_string(c_in) +
                                      ") are not divisible by groups = " + std::to_string(groups) + " (" +
                                      operands(x, w) + ")");
  if (!transposed) {
    const size_t c_out = w.shape()[0];
    if (w.shape()[1] != c_in / groups)
      throw Error(ErrorKind::Shape, std::string(op) + ": the kernel must have c_in/groups = " +
                                        std::to_string(c_in / groups) + " channels in dim 1, got " + operands(x, w) +
                                        "; the kernel layout is (c_out, c_in/groups, ...)");
    if (c_out % groups != 0)
      throw Error(ErrorKind::Shape, std::string(op) + ": output channels (kernel dim 0 = " + std::to_string(c_out) +
                                        ") are not divisible by groups = " + std::to_string(groups) + " (" +
                                        operands(x, w) + ")");
    return c_out;
  }
  if (w.shape()[0] != c_in)
    throw Error(ErrorKind::Shape, std::string(op) + ": the kernel must have c_in = " + std::to_string(c_in) +
                                      " in dim 0, got " + operands(x, w) +
                                      "; the kernel layout is (c_in, c_out/groups, ...)");
  return w.shape()[1] * groups;
}

Tensor conv1d_impl(const Tensor& x, const Tensor& w, const Conv1dParams& p, bool transposed) {
  const char* op = transposed ? "conv_transpose1d" : "conv1d";
  check_pair(x, w, 3, op, "NCL");
  Conv1dShape s{x.shape()[0], x.shape()[1], x.shape()[2], 0, w.shape()[2], p};
  s.c_out = check_channels(op, x, w, p.groups, transposed);
  const size_t l_out = out_size(op, "length", x, w, s.l_in, s.k_size, p.padding, p.stride, p.dilation,
                                p.output_padding, transposed);
  checked_numel({s.b, s.c_out, l_out}, op);
  auto st = transposed ? x.storage()->conv_transpose1d(x.layout(), *w.storage(), w.layout(), s)
                       : x.storage()->conv1d(x.layout(), *w.storage(), w.layout(), s);
  return wrap_like(std::move(st), {s.b, s.c_out, l_out}, x);
}

Tensor conv2d_impl(const Tensor& x, const Tensor& w, const Conv2dParams& p, bool transposed) {
  const char* op = transposed ? "conv_transpose2d" : "conv2d";
  check_pair(x, w, 4, op, "NCHW");
  Conv2dShape s{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], 0, w.shape()[2], w.shape()[3], p};
  s.c_out = check_channels(op, x, w, p.groups, transposed);
  const size_t h_out = out_size(op, "height", x, w, s.h_in, s.k_h, p.padding_h, p.stride_h, p.dilation_h,
                                p.output_padding_h, transposed);
  const size_t w_out = out_size(op, "width", x, w, s.w_in, s.k_w, p.padding_w, p.stride_w, p.dilation_w,
                                p.output_padding_w, transposed);
  checked_numel({s.b, s.c_out, h_out, w_out}, op);
  auto st = transposed ? x.storage()->conv_transpose2d(x.layout(), *w.storage(), w.layout(), s)
                       : x.storage()->conv2d(x.layout(), *w.storage(), w.layout(), s);
  return wrap_like(std::move(st), {s.b, s.c_out, h_out, w_out}, x);
}

void check_rank(const Tensor& t, size_t rank, const char* op, const char* layout) {
  check_defined(t, op);
  if (t.rank() != rank)
    throw Error(ErrorKind::Shape, std::string(op) + ": needs a rank-" + std::to_string(rank) + " " + layout +
                                      " tensor, got " + describe(t));
}

void check_pool(const Tensor& t, size_t kh, size_t kw, size_t sh, size_t sw, const char* op) {
  check_rank(t, 4, op, "NCHW");
  const std::string args = " (kernel " + std::to_string(kh) + "x" + std::to_string(kw) + ", stride " +
                           std::to_string(sh) + "x" + std::to_string(sw) + ", input " + describe(t) + ")";
  if (kh == 0 || kw == 0) throw Error(ErrorKind::Argument, std::string(op) + ": the kernel size must be at least 1" + args);
  if (sh == 0 || sw == 0) throw Error(ErrorKind::Argument, std::string(op) + ": the stride must be at least 1" + args);
  if (t.shape()[2] < kh || t.shape()[3] < kw)
    throw Error(ErrorKind::Shape, std::string(op) + ": the kernel is larger than the input" + args +
                                      "; use a smaller kernel (pooling does not pad)");
}

// Returns the output shape (n, c, out...), its element count checked. Backends also build
// per-dim index tables of the output sizes, so each output size alone must fit in memory too.
Shape check_resample(const Tensor& t, const Shape& in, const Shape& out, const char* op) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] == 0 || out[i] == 0)
      throw Error(ErrorKind::Shape, std::string(op) + ": input and output sizes must be at least 1; got input " +
                                        describe(t) + " and output size " + shape_str(out));
  Shape full = {t.shape()[0], t.shape()[1]};
  full.insert(full.end(), out.begin(), out.end());
  checked_numel(full, op);
  for (size_t o : out) checked_bytes(o, 2 * sizeof(int64_t), op);
  return full;
}

// Resampling with only wick::Error leaving: the backends' host-side tables can still fail to
// allocate (std::bad_alloc) when memory is short. An empty output needs no backend call.
template <class F> Tensor resample(const Tensor& t, const Shape& out, const char* op, F backend_call) {
  if (shape_numel(out) == 0) return Tensor::zeros(out, t.dtype(), t.device());
  if (t.device().is_cpu())  // the tables, up to 16 bytes per output row/column, are host memory
    for (size_t i = 2; i < out.size(); ++i) check_host_alloc(out[i] * 2 * sizeof(int64_t), op);
  try {
    return wrap_like(backend_call(), out, t);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::OutOfMemory, std::string(op) + ": out of memory for an output of " + shape_str(out) +
                                            " from " + describe(t) + "; use a smaller output size");
  } catch (const std::length_error&) {
    throw Error(ErrorKind::OutOfMemory, std::string(op) + ": an output of " + shape_str(out) + " from " +
                                            describe(t) + " is too large; use a smaller output size");
  }
}

}  // namespace

Tensor Tensor::conv1d(const Tensor& kernel, const Conv1dParams& p) const { return conv1d_impl(*this, kernel, p, false); }
Tensor Tensor::conv_transpose1d(const Tensor& kernel, const Conv1dParams& p) const {
  return conv1d_impl(*this, kernel, p, true);
}
Tensor Tensor::conv2d(const Tensor& kernel, const Conv2dParams& p) const { return conv2d_impl(*this, kernel, p, false); }
Tensor Tensor::conv_transpose2d(const Tensor& kernel, const Conv2dParams& p) const {
  return conv2d_impl(*this, kernel, p, true);
}

Tensor Tensor::avg_pool2d(size_t kh, size_t kw, size_t sh, size_t sw) const {
  check_pool(*this, kh, kw, sh, sw, "avg_pool2d");
  check_float(*this, "avg_pool2d");
  const Shape s = shape();
  return wrap_like(storage_->avg_pool2d(layout_, kh, kw, sh, sw),
                   {s[0], s[1], (s[2] - kh) / sh + 1, (s[3] - kw) / sw + 1}, *this);
}

Tensor Tensor::max_pool2d(size_t kh, size_t kw, size_t sh, size_t sw) const {
  check_pool(*this, kh, kw, sh, sw, "max_pool2d");
  const Shape s = shape();
  return wrap_like(storage_->max_pool2d(layout_, kh, kw, sh, sw),
                   {s[0], s[1], (s[2] - kh) / sh + 1, (s[3] - kw) / sw + 1}, *this);
}

Tensor Tensor::upsample_nearest1d(size_t out_l) const {
  check_rank(*this, 3, "upsample_nearest1d", "NCL");
  const Shape out = check_resample(*this, {shape()[2]}, {out_l}, "upsample_nearest1d");
  return resample(*this, out, "upsample_nearest1d", [&] { return storage_->upsample_nearest1d(layout_, out_l); });
}

Tensor Tensor::upsample_nearest2d(size_t out_h, size_t out_w) const {
  check_rank(*this, 4, "upsample_nearest2d", "NCHW");
  const Shape out = check_resample(*this, {shape()[2], shape()[3]}, {out_h, out_w}, "upsample_nearest2d");
  return resample(*this, out, "upsample_nearest2d",
                  [&] { return storage_->upsample_nearest2d(layout_, out_h, out_w); });
}

Tensor Tensor::upsample_bilinear2d(size_t out_h, size_t out_w, bool align_corners, std::optional<double> scale_h,
                                   std::optional<double> scale_w) const {
  const char* op = "upsample_bilinear2d";
  check_rank(*this, 4, op, "NCHW");
  check_float(*this, op);
  const Shape out = check_resample(*this, {shape()[2], shape()[3]}, {out_h, out_w}, op);
  for (auto sc : {scale_h, scale_w})
    if (sc && !(std::isfinite(*sc) && *sc > 0))
      throw Error(ErrorKind::Argument, std::string(op) + ": scale factors must be finite and positive, got " +
                                           std::to_string(*sc) + "; pass std::nullopt to use in/out");
  return resample(*this, out, op, [&] {
    return storage_->upsample_bilinear2d(layout_, out_h, out_w, align_corners, scale_h, scale_w);
  });
}

}  // namespace wick
