#pragma once
// The run-time choice of a quantizer's element format: the FP8 formats the GEMMs take
// (Fp8Format: e4m3, e5m2) and the Blackwell MX / NVFP4 element formats (e2m1, e3m2, e2m3)
// that only the quantizers take. Every FP8 format is an element format, so an Fp8Format
// converts to an ElementFormat implicitly; the other way is checked (fp8() throws naming the
// format), so a GEMM handed an FP4 or FP6 operand refuses it instead of reading its codes
// as E5M2.
#include <stdexcept>
#include <string>
#include <string_view>

#include "kernels/formats/float_formats.hpp"

namespace fp8lab {

// What the scale rules need to know about an element format (host and device).
struct ElementTraits {
  float max_finite;   // 448, 57344, 6, 28, 7.5
  int emax;           // exponent of the largest normal, OCP MX's emax_elem: 8, 15, 2, 4, 2
  int mantissa_bits;  // 3, 2, 1, 2, 3
};

template <class F>
FP8LAB_HD constexpr ElementTraits element_traits_of() {
  return {max_finite<F>(), static_cast<int>(F::max_finite_code >> F::mantissa_bits) - F::bias, F::mantissa_bits};
}

class ElementFormat {
 public:
  enum class Kind : std::uint8_t { e4m3, e5m2, e2m1, e3m2, e2m3 };

  constexpr ElementFormat(Fp8Format f) : kind_(f == Fp8Format::e4m3 ? Kind::e4m3 : Kind::e5m2) {}  // NOLINT: widening
  constexpr ElementFormat(Kind k) : kind_(k) {}                                                    // NOLINT

  constexpr Kind kind() const { return kind_; }
  constexpr bool is_fp8() const { return kind_ == Kind::e4m3 || kind_ == Kind::e5m2; }
  constexpr const char* name() const {
    switch (kind_) {
      case Kind::e4m3: return E4M3::name;
      case Kind::e5m2: return E5M2::name;
      case Kind::e2m1: return E2M1::name;
      case Kind::e3m2: return E3M2::name;
      case Kind::e2m3: return E2M3::name;
    }
    return "?";
  }
  constexpr ElementTraits traits() const {
    switch (kind_) {
      case Kind::e4m3: return element_traits_of<E4M3>();
      case Kind::e5m2: return element_traits_of<E5M2>();
      case Kind::e2m1: return element_traits_of<E2M1>();
      case Kind::e3m2: return element_traits_of<E3M2>();
      case Kind::e2m3: return element_traits_of<E2M3>();
    }
    return {};
  }
  // The FP8 format a GEMM needs; throws std::invalid_argument for e2m1 / e3m2 / e2m3.
  Fp8Format fp8() const {
    if (!is_fp8())
      throw std::invalid_argument(std::string("format ") + name() +
                                  " is an MX/NVFP4 element format: the promoted (Hopper-model) GEMMs take e4m3, e5m2; "
                                  "--accum b200's block-scaled MMA takes it");
    return kind_ == Kind::e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2;
  }

  friend constexpr bool operator==(ElementFormat a, ElementFormat b) { return a.kind_ == b.kind_; }

 private:
  Kind kind_;
};

inline const char* format_name(ElementFormat f) { return f.name(); }
constexpr float format_max(ElementFormat f) { return f.traits().max_finite; }

// "e4m3", "e5m2", "e2m1", "e3m2", "e2m3"; throws std::invalid_argument listing them.
ElementFormat parse_element_format(std::string_view text);

// Calls fn(F{}) with F the codec type of f (E4M3, E5M2, E2M1, E3M2, E2M3).
template <class Fn>
constexpr decltype(auto) with_element_codec(ElementFormat f, Fn&& fn) {
  switch (f.kind()) {
    case ElementFormat::Kind::e5m2: return fn(E5M2{});
    case ElementFormat::Kind::e2m1: return fn(E2M1{});
    case ElementFormat::Kind::e3m2: return fn(E3M2{});
    case ElementFormat::Kind::e2m3: return fn(E2M3{});
    case ElementFormat::Kind::e4m3: break;
  }
  return fn(E4M3{});
}

static_assert(element_traits_of<E4M3>().emax == 8 && element_traits_of<E5M2>().emax == 15);
static_assert(element_traits_of<E2M1>().emax == 2 && element_traits_of<E3M2>().emax == 4 &&
              element_traits_of<E2M3>().emax == 2);

}  // namespace fp8lab
