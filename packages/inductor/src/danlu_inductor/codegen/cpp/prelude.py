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
template <typename T> static inline T dl_sigmoid(T a) { return T(1) / (T(1) + std::exp(-a)); }
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
