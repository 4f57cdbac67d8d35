#pragma once
// The whole public API of wick.
#include "wick/device.hpp"
#include "wick/dtype.hpp"
#include "wick/error.hpp"
#include "wick/gguf.hpp"
#include "wick/io.hpp"
#include "wick/layout.hpp"
#include "wick/nn.hpp"
#include "wick/quant.hpp"
#include "wick/tensor.hpp"
#include "wick/version.hpp"
