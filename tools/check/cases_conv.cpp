// Cases: convolutions (stride, padding, dilation, groups, output padding), pooling, resampling.
// The batch dim is the one the Empty layout makes 0.
#include "check/cases.hpp"

namespace wick::check {

void add_conv_cases(std::vector<Case>& out) {
  add(out, "conv1d", "pad=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Conv1dParams p;
    p.padding = 1;
    return {in.x({in.n(2), 4, 20}, 51).conv1d(in.x({6, 4, 3}, 52), p)};
  });
  add(out, "conv1d", "stride=2,dil=2,groups=2", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Conv1dParams p;
    p.padding = 2, p.stride = 2, p.dilation = 2, p.groups = 2;
    return {in.x({in.n(2), 4, 21}, 53).conv1d(in.x({6, 2, 3}, 54), p)};
  });
  add(out, "conv2d", "pad=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 4, 9, 10}, 55).conv2d(in.x({6, 4, 3, 3}, 56), Conv2dParams::uniform(1))};
  });
  add(out, "conv2d", "stride=2,dil=2,groups=2", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Conv2dParams p = Conv2dParams::uniform(1, 2, 2, 2);
    p.padding_w = 2;
    return {in.x({in.n(2), 4, 11, 10}, 57).conv2d(in.x({6, 2, 3, 2}, 58), p)};
  });
  add(out, "conv_transpose1d", "stride=2,pad=1,out_pad=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Conv1dParams p;
    p.padding = 1, p.stride = 2, p.output_padding = 1;
    return {in.x({in.n(2), 4, 9}, 59).conv_transpose1d(in.x({4, 3, 3}, 60), p)};
  });
  add(out, "conv_transpose1d", "groups=2,dil=2", kAll, [](Inputs& in) -> std::vector<Tensor> {
    Conv1dParams p;
    p.groups = 2, p.dilation = 2;
    return {in.x({in.n(2), 4, 9}, 61).conv_transpose1d(in.x({4, 3, 3}, 62), p)};
  });
  add(out, "conv_transpose2d", "stride=2,pad=1,out_pad=1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 4, 5, 6}, 63).conv_transpose2d(in.x({4, 3, 3, 3}, 64), Conv2dParams::uniform(1, 2, 1, 1, 1))};
  });
  add(out, "conv_transpose2d", "groups=2", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 4, 5, 6}, 65).conv_transpose2d(in.x({4, 2, 2, 3}, 66), Conv2dParams::uniform(0, 1, 1, 2))};
  });
  add(out, "avg_pool2d", "2x2/2", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 9, 10}, 67).avg_pool2d(2, 2, 2, 2)};
  });
  add(out, "avg_pool2d", "3x2/2x1", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 9, 10}, 68).avg_pool2d(3, 2, 2, 1)};
  });
  add(out, "max_pool2d", "2x2/2", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 9, 10}, 69).max_pool2d(2, 2, 2, 2)};
  });
  add(out, "max_pool2d", "3x2/2x1", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 9, 10}, 70).max_pool2d(3, 2, 2, 1)};
  });
  add(out, "upsample_nearest1d", "7->15", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 7}, 71).upsample_nearest1d(15)};
  });
  add(out, "upsample_nearest2d", "5x6->11x4", kAll, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 5, 6}, 72).upsample_nearest2d(11, 4)};
  });
  for (bool ac : {false, true})
    add(out, "upsample_bilinear2d", ac ? "align_corners" : "", kFloats, [ac](Inputs& in) -> std::vector<Tensor> {
      return {in.x({in.n(2), 3, 5, 6}, 73).upsample_bilinear2d(11, 4, ac)};
    });
  add(out, "upsample_bilinear2d", "scale=2.5,0.75", kFloats, [](Inputs& in) -> std::vector<Tensor> {
    return {in.x({in.n(2), 3, 5, 6}, 74).upsample_bilinear2d(12, 4, false, 2.5, 0.75)};
  });
}

}  // namespace wick::check
