// unrolled<N>(f): calls f(std::integral_constant<int, I>{}) for I = 0 .. N-1, unrolled at compile time. Kernels
// index their register arrays with these constants: indexed by a loop variable, GCC keeps them on the stack.
#pragma once

#include <utility>

// For the lambdas a large kernel gives unrolled() (and its epilogue helpers): in a big enough function GCC
// declines to inline one, and the register arrays whose addresses reach that call go to the stack, in the
// hot loop as well (a store of every accumulator per K step).
#define OPTIM_INLINED __attribute__((always_inline))

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
