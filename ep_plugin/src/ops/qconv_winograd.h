// QWinogradForm: the integer channels-last convolution unit (qconv_nhwc_forms.h) as an exact Winograd F(2x2, 3x3)
// on int16 pairs, for the units rewrites/winograd.cc marks algorithm="winograd": 3x3 stride-1 convolutions of one
// group on tables without VNNI's u8 x s8 quads (AVX2: 8-bit weights on int16 pairs, 7-bit ones on vpmaddubsw
// pairs, both slower than this) whose int32 values cannot overflow (sums_fit_int32). Integer transforms
// (kernel_table.h, WinogradInputQ8Fn): 16 multiply-adds per 2x2 output pixels and input channel instead of 36,
// the same bytes as the direct form.
#pragma once

#include <vector>

#include "qconv_nhwc_forms.h"
#include "winograd_schedule.h"
#include "../aligned_vector.h"

namespace optim {

class QWinogradForm : public QConvForm {
 public:
  explicit QWinogradForm(const QConvUnit& u);
  // Whether unit u's every int32 value on the way stays in range: per output channel, the sum over positions
  // and input channels of |U'| times the largest |V| its input type allows (4x the largest |x - zero point|)
  // below 2^31 bounds every partial sum of the GEMMs and of the output transform.
  static bool sums_fit_int32(const QConvUnit& u);
  void prepare(const kernels::KernelTable& kt) override;
  size_t scratch_bytes(const NhwcConvLayout& l) const override { return schedule_.scratch_bytes(l); }
  void run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
           const QAddRows& other) const override;
  const char* kernel_name() const override { return kernel_ ? kernel_ : ""; }

 private:
  int64_t kt_ = 2;  // input channels padded to pairs
  WinogradSchedule schedule_;
  const char* kernel_ = nullptr;
  size_t packed_elems_ = 0;        // one packed position
  AlignedVector<int16_t> packed_;  // 16 packed positions of U' (qgemm_s16_pack_b)
};

}  // namespace optim
