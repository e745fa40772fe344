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
// calls). Each is within ~2 ulp of the correctly rounded result (checked in the tests).
static inline float dl_pow2i(int32_t k) {  // 2^k for k in [-126, 127]
    uint32_t bits = (uint32_t)(k + 127) << 23; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline float dl_expf(float x) {
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
    float r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    int32_t n = (int32_t)fn;
    int32_t n1 = n / 2;
    y = y * dl_pow2i(n1) * dl_pow2i(n - n1);
    return x != x ? x : y;
}
static inline float dl_exp(float x) { return dl_expf(x); }
static inline double dl_exp(double x) { return std::exp(x); }
static inline float dl_tanh(float x) {
    float ax = x < 0 ? -x : x;
    float e = dl_expf(-2.0f * ax);
    float big = (1.0f - e) / (1.0f + e);
    float x2 = ax * ax;  // odd series for small |x|, where the formula above cancels
    float small = ax * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * (-0.0539682540f
                    + x2 * 0.0218694885f))));
    float t = ax < 0.125f ? small : big;
    t = x < 0 ? -t : t;
    return x != x ? x : t;
}
static inline double dl_tanh(double x) { return std::tanh(x); }
static inline float dl_erf(float x) {
    float ax = x < 0 ? -x : x;
    // |x| < 0.5: Maclaurin series; else erfc by the Chebyshev fit of Numerical Recipes
    float x2 = ax * ax;
    float small = ax * (1.1283791671f + x2 * (-0.3761263890f + x2 * (0.1128379167f
                    + x2 * (-0.0268661706f + x2 * (0.0052239776f + x2 * (-0.0008548327f
                    + x2 * 0.0001205533f))))));
    float t = 1.0f / (1.0f + 0.5f * ax);
    float poly = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f
                 + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f
                 + t * (-0.82215223f + t * 0.17087277f))))))));
    float big = 1.0f - t * dl_expf(-x2 + poly);
    float r = ax < 0.5f ? small : big;
    r = r > 1.0f ? 1.0f : r;
    r = x < 0 ? -r : r;
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
