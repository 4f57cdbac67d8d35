#pragma once
// Losses as candle_nn::loss defines them (composites of Tensor ops, src/core/loss.cpp). Each
// returns a 0-D tensor (shape []) of the input's dtype holding the mean over the batch (nll,
// cross_entropy) or over all elements (the others). Half types compute in f32 and round once.
#include "wick/tensor.hpp"

namespace wick::loss {

// Negative log likelihood: inp (N, C) log-probabilities, target (N) class ids (u8 u32 i16 i32
// i64). -mean_n inp[n, target[n]]. A target equal to its dtype's maximum (the sentinel id)
// contributes 0 and still counts in N, as in Candle.
Tensor nll(const Tensor& inp, const Tensor& target);
// nll(log_softmax(logits, 1), target): logits (N, C).
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
// Binary cross-entropy on logits: inp and target of the same shape and float dtype;
// mean(max(x, 0) - x * t + log(1 + exp(-|x|))), the stable form of Candle's
// -(t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))) (PyTorch's binary_cross_entropy_with_logits).
Tensor binary_cross_entropy_with_logit(const Tensor& inp, const Tensor& target);
// Mean squared error: mean((inp - target)^2), same shapes.
Tensor mse(const Tensor& inp, const Tensor& target);
// Huber (PyTorch's huber_loss): d = inp - target; 0.5 d^2 where |d| < delta, else
// delta (|d| - delta / 2); the mean. delta must be > 0 and finite.
Tensor huber(const Tensor& inp, const Tensor& target, double delta);

}  // namespace wick::loss
