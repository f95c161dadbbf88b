// Scalar 256-entry byte table lookup (kernel_table.h, Lut8Fn).
#include "kernel_table.h"

namespace optim::kernels {

void lut8_scalar(const uint8_t* x, uint8_t flip, const uint8_t* table, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = table[x[i] ^ flip];
}

}  // namespace optim::kernels
