"""Helpers every generated C++ file starts with: torch's semantics for the ops set."""

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>
#include <omp.h>

typedef uint16_t dl_bf16;
typedef _Float16 dl_half;

static inline float dl_from_bf16(dl_bf16 v) {
    uint32_t bits = ((uint32_t)v) << 16; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline dl_bf16 dl_to_bf16(float f) {
    uint32_t bits; std::memcpy(&bits, &f, 4);
    if (std::isnan(f)) return (dl_bf16)0x7fc0;
    uint32_t rounding = 0x7fff + ((bits >> 16) & 1);  // round to nearest even
    return (dl_bf16)((bits + rounding) >> 16);
}

template <typename T> static inline T dl_max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) { if (a != a) return a; if (b != b) return b; }
    return a > b ? a : b;
}
template <typename T> static inline T dl_min(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) { if (a != a) return a; if (b != b) return b; }
    return a < b ? a : b;
}
template <typename T> static inline T dl_fmax(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmax(a, b); else return a > b ? a : b;
}
template <typename T> static inline T dl_fmin(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmin(a, b); else return a < b ? a : b;
}
template <typename T> static inline T dl_floordiv(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (b == 0) return a / b;
        T mod = std::fmod(a, b);
        T div = (a - mod) / b;
        if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
        T fl;
        if (div != 0) { fl = std::floor(div); if (div - fl > T(0.5)) fl += 1; }
        else { fl = std::copysign(T(0), a / b); }
        return fl;
    } else {
        if (b == 0) return 0;  // eager raises; never a crash here
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
        return q;
    }
}
template <typename T> static inline T dl_truncdiv(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::trunc(a / b);
    else { if (b == 0) return 0; return a / b; }
}
template <typename T> static inline T dl_mod(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        T r = std::fmod(a, b);
        if (r != 0 && ((b < 0) != (r < 0))) r += b;
        return r;
    } else {
        if (b == 0) return 0;
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
}
template <typename T> static inline T dl_fmod(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b);
    else { if (b == 0) return 0; return a % b; }
}
template <typename T> static inline T dl_pow(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::pow(a, b);
    else {
        if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
        T result = 1;
        while (b) { if (b & 1) result = (T)(result * a); b >>= 1; a = (T)(a * a); }
        return result;
    }
}
template <typename T> static inline T dl_sign(T a) {
    if constexpr (std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_floating_point_v<T>) { if (a != a) return 0; return (T)((T(0) < a) - (a < T(0))); }
    else return (T)((T(0) < a) - (a < T(0)));
}
template <typename T> static inline T dl_abs(T a) {
    if constexpr (std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_floating_point_v<T>) return std::abs(a);
    else return a < 0 ? (T)(-a) : a;
}
// Branch-free float math that the compiler vectorizes (libm's expf/tanhf/erff are scalar
// calls). Accuracy against float64, checked in tests/test_cpp_math.py: exp <= 1.5 ulp,
// tanh <= 2 ulp, erf <= 4 ulp (eager's vectorized GELU erf is looser: 1.5e-7 absolute).
// Polynomials use fused multiply-adds when the target has them (our own rounding, not the
// user's: -ffp-contract=off still keeps generated arithmetic unfused). No path produces or
// consumes a subnormal in float arithmetic: those take microcode assists (~100x slower).
#if defined(__FMA__)
#define DL_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define DL_FMA(a, b, c) ((a) * (b) + (c))
#endif
static inline float dl_bits_f(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
static inline uint32_t dl_f_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
static inline float dl_pow2i(int32_t k) {  // 2^k for k in [-126, 127]
    return dl_bits_f((uint32_t)(k + 127) << 23);
}
static inline float dl_expf(float x) {
    // exp(x) = 2^n e^r, n = round(x / ln 2), |r| <= ln 2 / 2 (Cody-Waite), degree-7 polynomial.
    // Written so that gcc vectorizes it into ~25 instructions: a one-sided clamp (a two-sided
    // one made gcc specialize the clamped lanes into masks), n read from the bits of the
    // rounding add, 2^n applied as an integer add to the exponent field.
    float xc = x > -104.0f ? x : -104.0f;  // NaN -> -104, fixed at the end
    float fm = DL_FMA(xc, 1.44269504088896341f, 12582912.0f);  // n in the low mantissa bits
    float fn = fm - 12582912.0f;
    float r = DL_FMA(fn, -0.693359375f, xc);
    r = DL_FMA(fn, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = DL_FMA(p, r, 1.3981999507e-3f);
    p = DL_FMA(p, r, 8.3334519073e-3f);
    p = DL_FMA(p, r, 4.1665795894e-2f);
    p = DL_FMA(p, r, 1.6666665459e-1f);
    p = DL_FMA(p, r, 5.0000001201e-1f);
    float y = DL_FMA(p, r * r, r + 1.0f);
    // y * 2^n: add n to y's exponent field (exact while the result is a normal number)
    int32_t ob = (int32_t)dl_f_bits(y) + (int32_t)(dl_f_bits(fm) << 23);
    // subnormal results (ob below FLT_MIN's bits): z = y * 2^(n + 149) < 2^23, rounded to an
    // integer by adding 2^23, is the subnormal's bit pattern. The min keeps z a normal
    // number in the other lanes (a garbage subnormal there would cost an assist).
    float z = dl_bits_f((uint32_t)(std::min(ob, 0x00800000) + (149 << 23)));
    uint32_t sb = dl_f_bits(z + 8388608.0f) - 0x4B000000u;
    float out = dl_bits_f(ob < 0x00800000 ? sb : (uint32_t)ob);
    // 88.7228317 is the largest float whose exp is finite; above it inf. NaN is returned
    // itself (sign included: x * inf would let gcc fold a negation into the constant)
    out = x <= 88.72283172607421875f ? out : std::numeric_limits<float>::infinity();
    return x != x ? x : out;
}
static inline float dl_exp(float x) { return dl_expf(x); }
static inline double dl_exp(double x) { return std::exp(x); }
static inline float dl_tanh(float x) {
    // |x| < 0.625: x + x^3 P(x^2) (least-squares fit, 6e-9 relative); above:
    // (1 - e) / (1 + e) with e = exp(-2|x|) <= 0.29, so the error of e is not amplified.
    // |x| is capped at 9.1, where tanh rounds to 1 (keeps e normal).
    float ax = std::fabs(x);
    float axc = std::min(ax, 9.1f);
    float e = dl_expf(-2.0f * axc);
    float big = (1.0f - e) / (1.0f + e);
    float x2 = axc * axc;
    float s = 0.0023141561541706324f;
    s = DL_FMA(s, x2, -0.008365856483578682f);
    s = DL_FMA(s, x2, 0.021776918321847916f);
    s = DL_FMA(s, x2, -0.053960494697093964f);
    s = DL_FMA(s, x2, 0.13333310186862946f);
    s = DL_FMA(s, x2, -0.3333333432674408f);
    float small = DL_FMA(axc * x2, s, axc);
    float t = ax < 0.625f ? small : big;
    t = std::copysign(t, x);
    return x != x ? x : t;
}
static inline double dl_tanh(double x) { return std::tanh(x); }
static inline float dl_erf(float x) {
    // Two polynomials, no division and no exp (tools/fit_erf.py fits them): |x| < 1:
    // x P(x^2), P of degree 6 (relative error 1.2e-9); 1 <= |x| < 4: 1 - erfc(x) with erfc a
    // degree-14 polynomial in u = (2|x| - 5) / 3 (absolute error 9.4e-9); |x| >= 4: 1.
    // float32: at most 2.5 ulp over every float (2.6 without FMA). The exp-and-division form
    // it replaced took a GELU over 1M floats from 0.31 to 0.42 ms (2 threads).
    float ax = std::min(std::fabs(x), 4.0f);
    float t = ax * ax;
    float p = 7.854075269573731e-05f;
    p = DL_FMA(p, t, -0.0008010256695497073f);
    p = DL_FMA(p, t, 0.0051883346383501325f);
    p = DL_FMA(p, t, -0.02685381545580391f);
    p = DL_FMA(p, t, 0.11283585228869404f);
    p = DL_FMA(p, t, -0.3761262583088935f);
    p = DL_FMA(p, t, 1.128379165727592f);
    float small = ax * p;
    float u = DL_FMA(ax, 0.6666666666666666f, -1.6666666666666667f);
    float s = -0.00026160720259839733f;
    s = DL_FMA(s, u, -9.913388921764112e-05f);
    s = DL_FMA(s, u, 0.0020458357124729597f);
    s = DL_FMA(s, u, -0.0015293982434137594f);
    s = DL_FMA(s, u, -0.004685659494646824f);
    s = DL_FMA(s, u, 0.01039497370249635f);
    s = DL_FMA(s, u, -0.006624583457548391f);
    s = DL_FMA(s, u, -0.009569197904008798f);
    s = DL_FMA(s, u, 0.03186355458709508f);
    s = DL_FMA(s, u, -0.04639252600902515f);
    s = DL_FMA(s, u, 0.04365234643790924f);
    s = DL_FMA(s, u, -0.028187039452732182f);
    s = DL_FMA(s, u, 0.012252771980201022f);
    s = DL_FMA(s, u, -0.0032672834079932253f);
    s = DL_FMA(s, u, 0.00040695267111635094f);
    float r = ax < 1.0f ? small : 1.0f - s;
    r = std::copysign(std::min(r, 1.0f), x);
    return x != x ? x : r;
}
static inline double dl_erf(double x) { return std::erf(x); }
template <typename T> static inline T dl_sigmoid(T a) { return T(1) / (T(1) + dl_exp(-a)); }
template <typename T> static inline T dl_lshift(T a, T b) {
    using U = std::make_unsigned_t<T>;
    if (b < 0 || b >= (T)(sizeof(T) * 8)) return 0;
    return (T)((U)a << b);
}
template <typename T> static inline T dl_rshift(T a, T b) {
    if (b < 0 || b >= (T)(sizeof(T) * 8)) return a < 0 ? (T)-1 : (T)0;
    return (T)(a >> b);
}

// 1/b is a normal number (no overflow, no lost bits): a * (1/b) is then within 1.5 ulp of a/b
template <typename T> static inline bool dl_recip_ok(T b) {
    T m = std::fabs(b);
    if constexpr (sizeof(T) == 4) return m >= 0x1p-126f && m <= 0x1p126f;
    else return m >= 0x1p-1022 && m <= 0x1p1022;
}
// Welford accumulator (mean, m2, weight) with Chan's combine for split reductions.
struct dl_welford { double mean = 0, m2 = 0, weight = 0; };
static inline dl_welford dl_welford_add(dl_welford a, double x) {
    a.weight += 1; double d = x - a.mean; a.mean += d / a.weight; a.m2 += d * (x - a.mean);
    return a;
}
static inline dl_welford dl_welford_combine(dl_welford a, dl_welford b) {
    if (b.weight == 0) return a; if (a.weight == 0) return b;
    double w = a.weight + b.weight, d = b.mean - a.mean, nb = b.weight / w;
    dl_welford out; out.mean = a.mean + d * nb; out.m2 = a.m2 + b.m2 + d * d * a.weight * nb;
    out.weight = w; return out;
}
// Arg reductions: value and first index; NaN wins like in eager.
template <typename T> struct dl_arg { T value; int64_t index; };
template <typename T> static inline bool dl_nan(T v) {
    if constexpr (std::is_floating_point_v<T>) return v != v; else return false;
}
template <typename T> static inline dl_arg<T> dl_argmax_add(dl_arg<T> a, T v, int64_t i) {
    if (a.index < 0) return {v, i};
    if (dl_nan(a.value)) return a;
    if (dl_nan(v) || v > a.value || (v == a.value && i < a.index)) return {v, i};
    return a;
}
template <typename T> static inline dl_arg<T> dl_argmin_add(dl_arg<T> a, T v, int64_t i) {
    if (a.index < 0) return {v, i};
    if (dl_nan(a.value)) return a;
    if (dl_nan(v) || v < a.value || (v == a.value && i < a.index)) return {v, i};
    return a;
}
"""
