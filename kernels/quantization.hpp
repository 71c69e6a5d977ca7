#pragma once
// What a quantized tensor is, shared by the CPU and CUDA backends: element format, granularity
// (the tile one scale covers), scale rule (kernels/scale_rules.hpp), and the container for
// codes + scales.
//
// A 2-D tensor is rows x cols, row-major; rows are tokens (activations) or output
// channels (weights) and cols run along the GEMM's K. Every granularity is one tile shape:
//   tensor      the whole tensor            (1 scale)
//   row         1 x cols                    (per token / per channel)
//   tile:1xT    1 x T along K               (DeepSeek-V3 activations, T = 128)
//   block:BxB   B x B                       (DeepSeek-V3 weights, B = 128)
// The scale grid is ceil(rows / tile_rows) x ceil(cols / tile_cols): a K that is not a
// multiple of T is zero-padded, and the padding shows in the grid's shape.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/formats/element_format.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/formats/stochastic_rounding.hpp"
#include "kernels/scale_rules.hpp"

namespace fp8lab {

Fp8Format parse_fp8_format(std::string_view text);   // throws std::invalid_argument

// "nearest", "stochastic" (kernels/formats/stochastic_rounding.hpp); throws std::invalid_argument
// listing them.
RoundingMode parse_rounding_mode(std::string_view text);
const char* rounding_mode_name(RoundingMode mode);

struct Granularity {
  enum class Kind { tensor, row, tile, block };
  Kind kind = Kind::tensor;
  int size = 0;  // T for tile:1xT, B for block:BxB, 0 otherwise

  // Tile sizes this project sweeps: powers of two from 16 to 512.
  static constexpr int kMinSize = 16, kMaxSize = 512;

  static Granularity tensor() { return {Kind::tensor, 0}; }
  static Granularity row() { return {Kind::row, 0}; }
  static Granularity tile(int t) { return {Kind::tile, t}; }
  static Granularity block(int b) { return {Kind::block, b}; }
  // "tensor", "row", "tile:1x128", "block:128x128"; throws std::invalid_argument saying why.
  static Granularity parse(std::string_view text);
  std::string to_string() const;

  std::int64_t tile_rows(std::int64_t rows) const;
  std::int64_t tile_cols(std::int64_t cols) const;
  bool operator==(const Granularity&) const = default;
};

struct QuantizeConfig {
  ElementFormat format = Fp8Format::e4m3;
  Granularity granularity = Granularity::tile(128);
  ScaleRule scale_rule = ScaleRule::fp32;
  Rounding rounding = {};  // of the scaled elements: nearest (RNE) unless stochastic with a seed
};

struct QuantizedTensor {
  std::int64_t rows = 0, cols = 0;
  QuantizeConfig config;
  std::int64_t tile_rows = 0, tile_cols = 0;    // extent of the tile one scale covers
  std::int64_t scale_rows = 0, scale_cols = 0;  // the scale grid
  std::vector<std::uint8_t> codes;              // rows x cols, row-major
  std::vector<float> scales;                    // scale_rows x scale_cols, row-major: each tile's
                                                // TileScale::decode (for nvfp4 the E4M3 block scale s_b)
  // The per-tensor level of the two-level (nvfp4) rules, {1, 1} otherwise, and the amax it
  // came from. Dequantization: x' = fl32(decode(q) * fl32(scale * tensor_scale.decode)).
  TensorScale tensor_scale;
  float tensor_amax = 0.0f;

  float scale_of(std::int64_t r, std::int64_t c) const {
    return scales[static_cast<std::size_t>((r / tile_rows) * scale_cols + c / tile_cols)];
  }
};

// Allocates a QuantizedTensor of the right geometry for rows x cols, codes zeroed and scales 1;
// throws std::invalid_argument when the rule cannot serve the format (check_rule_serves_format).
QuantizedTensor make_quantized_tensor(std::int64_t rows, std::int64_t cols, const QuantizeConfig& config);

}  // namespace fp8lab
