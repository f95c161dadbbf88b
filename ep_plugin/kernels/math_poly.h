// The polynomials of the vector transcendental functions, written once over a vector type V (math_avx2.h's
// F32x8, math_avx512.h's F32x16: set1, add, mul, fmadd, fnmadd, div, round). What differs per ISA (scaling by
// 2^n, comparisons, masks and blends) stays in those files. Included only by them.
#pragma once

namespace optim::kernels {
namespace {  // internal linkage: one copy per including file, compiled with its flags

// exp's range reduction and polynomial: xc = n*ln2 + r with |r| <= ln2/2 (ln2 split into a part exact in float
// and the rest, to keep r's precision); returns e^r by a degree-6 polynomial and sets n, for the caller to scale
// by 2^n.
template <class V>
typename V::Reg exp_reduced(typename V::Reg xc, typename V::Reg& n) {
  n = V::round(V::mul(xc, V::set1(1.44269504088896341f)));
  typename V::Reg r = V::fnmadd(n, V::set1(0.693359375f), xc);
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  typename V::Reg p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  return V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.f)));
}

// erf(x) for |x| < 0.5 (x2 = x*x): 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320), accurate
// relative to x near 0.
template <class V>
typename V::Reg erf_small(typename V::Reg x, typename V::Reg x2) {
  typename V::Reg s = V::set1(-1.0f / 1320.f);
  s = V::fmadd(s, x2, V::set1(1.0f / 216.f));
  s = V::fmadd(s, x2, V::set1(-1.0f / 42.f));
  s = V::fmadd(s, x2, V::set1(1.0f / 10.f));
  s = V::fmadd(s, x2, V::set1(-1.0f / 3.f));
  s = V::fmadd(s, x2, V::set1(1.f));
  return V::mul(V::mul(s, x), V::set1(1.12837916709551257f));
}

// erf's tail factor for |x| = a (Abramowitz & Stegun 7.1.26): t*poly(t) with t = 1/(1 + 0.3275911a), so that
// erf(a) = 1 - tail * e^(-a^2).
template <class V>
typename V::Reg erf_tail(typename V::Reg a) {
  const typename V::Reg t = V::div(V::set1(1.f), V::fmadd(a, V::set1(0.3275911f), V::set1(1.f)));
  typename V::Reg q = V::set1(1.061405429f);
  q = V::fmadd(q, t, V::set1(-1.453152027f));
  q = V::fmadd(q, t, V::set1(1.421413741f));
  q = V::fmadd(q, t, V::set1(-0.284496736f));
  q = V::fmadd(q, t, V::set1(0.254829592f));
  return V::mul(q, t);
}

// tanh(x) near 0, where 2 sigmoid(2x) - 1 loses relative precision: its Taylor series to x^11.
template <class V>
typename V::Reg tanh_small(typename V::Reg x) {
  const typename V::Reg x2 = V::mul(x, x);
  typename V::Reg t = V::set1(-1382.f / 155925.f);
  t = V::fmadd(t, x2, V::set1(62.f / 2835.f));
  t = V::fmadd(t, x2, V::set1(-17.f / 315.f));
  t = V::fmadd(t, x2, V::set1(2.f / 15.f));
  t = V::fmadd(t, x2, V::set1(-1.f / 3.f));
  return V::fmadd(V::mul(t, x2), x, x);
}

}  // namespace
}  // namespace optim::kernels
