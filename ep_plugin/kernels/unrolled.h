// unrolled<N>(f): calls f(std::integral_constant<int, I>{}) for I = 0 .. N-1, unrolled at compile time. Kernels
// index their register arrays with these constants: indexed by a loop variable, GCC keeps them on the stack.
#pragma once

#include <utility>

namespace optim::kernels {

template <typename F, int... I>
inline __attribute__((always_inline)) void unrolled(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
inline __attribute__((always_inline)) void unrolled(F&& f) {
  unrolled(f, std::make_integer_sequence<int, N>{});
}

}  // namespace optim::kernels
