// Output sizes of the convolutions (PyTorch's formulas). The core has checked that every
// result is at least 1 before a backend sees the shape, so the arithmetic cannot wrap.
#include "backend/storage.hpp"

namespace wick {

static size_t conv_out(size_t in, size_t k, size_t pad, size_t stride, size_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}
static size_t conv_out_transposed(size_t in, size_t k, size_t pad, size_t stride, size_t dil, size_t out_pad) {
  return (in - 1) * stride + dil * (k - 1) + out_pad + 1 - 2 * pad;
}

size_t Conv1dShape::l_out() const { return conv_out(l_in, k_size, p.padding, p.stride, p.dilation); }
size_t Conv1dShape::l_out_transposed() const {
  return conv_out_transposed(l_in, k_size, p.padding, p.stride, p.dilation, p.output_padding);
}
size_t Conv2dShape::h_out() const { return conv_out(h_in, k_h, p.padding_h, p.stride_h, p.dilation_h); }
size_t Conv2dShape::w_out() const { return conv_out(w_in, k_w, p.padding_w, p.stride_w, p.dilation_w); }
size_t Conv2dShape::h_out_transposed() const {
  return conv_out_transposed(h_in, k_h, p.padding_h, p.stride_h, p.dilation_h, p.output_padding_h);
}
size_t Conv2dShape::w_out_transposed() const {
  return conv_out_transposed(w_in, k_w, p.padding_w, p.stride_w, p.dilation_w, p.output_padding_w);
}

}  // namespace wick
