#pragma once
// Op families whose Tensor methods have landed. While a family is being written its methods do
// not link yet, so its cases stay out of the build; every family is 1 once merged.
#define WICK_CHECK_ELEMENTWISE 1
#define WICK_CHECK_REDUCE 1
#define WICK_CHECK_INDEX 1
#define WICK_CHECK_LINALG 1
#define WICK_CHECK_CONV 1
