#include "kernels/quantization.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

namespace fp8lab {

Fp8Format parse_fp8_format(std::string_view text) {
  if (text == "e4m3") return Fp8Format::e4m3;
  if (text == "e5m2") return Fp8Format::e5m2;
  throw std::invalid_argument("format '" + std::string(text) + "' is not one of e4m3, e5m2");
}

RoundingMode parse_rounding_mode(std::string_view text) {
  if (text == "nearest") return RoundingMode::nearest;
  if (text == "stochastic") return RoundingMode::stochastic;
  throw std::invalid_argument("rounding '" + std::string(text) + "' is not one of nearest, stochastic");
}

const char* rounding_mode_name(RoundingMode mode) {
  return mode == RoundingMode::stochastic ? "stochastic" : "nearest";
}

ElementFormat parse_element_format(std::string_view text) {
  using Kind = ElementFormat::Kind;
  for (const Kind kind : {Kind::e4m3, Kind::e5m2, Kind::e2m1, Kind::e3m2, Kind::e2m3})
    if (text == ElementFormat(kind).name()) return kind;
  throw std::invalid_argument("format '" + std::string(text) + "' is not one of e4m3, e5m2, e2m1, e3m2, e2m3");
}

namespace {

int parse_size(std::string_view digits, std::string_view whole) {
  int value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size())
    throw std::invalid_argument("granularity '" + std::string(whole) + "': '" + std::string(digits) +
                                "' is not a whole number");
  const bool power_of_two = value > 0 && (value & (value - 1)) == 0;
  if (!power_of_two || value < Granularity::kMinSize || value > Granularity::kMaxSize)
    throw std::invalid_argument("granularity '" + std::string(whole) + "': size " + std::to_string(value) +
                                " is not a power of two from 16 to 512");
  return value;
}

}  // namespace

Granularity Granularity::parse(std::string_view text) {
  if (text == "tensor") return tensor();
  if (text == "row") return row();
  const auto usage = [&] {
    return std::invalid_argument("granularity '" + std::string(text) +
                                 "' is not one of tensor, row, tile:1xT, block:BxB");
  };
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) throw usage();
  const std::string_view kind = text.substr(0, colon);
  const std::string_view extent = text.substr(colon + 1);
  const std::size_t x = extent.find('x');
  if (x == std::string_view::npos) throw usage();
  const std::string_view first = extent.substr(0, x), second = extent.substr(x + 1);
  if (kind == "tile") {
    if (first != "1")
      throw std::invalid_argument("granularity '" + std::string(text) +
                                  "': tiles are 1xT (one row, T along K); use block:BxB for square blocks");
    return tile(parse_size(second, text));
  }
  if (kind == "block") {
    const int rows = parse_size(first, text), cols = parse_size(second, text);
    if (rows != cols)
      throw std::invalid_argument("granularity '" + std::string(text) + "': blocks are square (BxB)");
    return block(rows);
  }
  throw usage();
}

std::string Granularity::to_string() const {
  switch (kind) {
    case Kind::tensor: return "tensor";
    case Kind::row: return "row";
    case Kind::tile: return "tile:1x" + std::to_string(size);
    case Kind::block: return "block:" + std::to_string(size) + "x" + std::to_string(size);
  }
  return "?";
}

std::int64_t Granularity::tile_rows(std::int64_t rows) const {
  switch (kind) {
    case Kind::tensor: return rows > 0 ? rows : 1;
    case Kind::row: case Kind::tile: return 1;
    case Kind::block: return size;
  }
  return 1;
}

std::int64_t Granularity::tile_cols(std::int64_t cols) const {
  switch (kind) {
    case Kind::tensor: case Kind::row: return cols > 0 ? cols : 1;
    case Kind::tile: case Kind::block: return size;
  }
  return 1;
}

QuantizedTensor make_quantized_tensor(std::int64_t rows, std::int64_t cols, const QuantizeConfig& config) {
  if (rows < 0 || cols < 0) throw std::invalid_argument("tensor shape must not be negative");
  // rows * cols and the tile-grid arithmetic below stay far from int64 overflow.
  constexpr std::int64_t kLimit = std::int64_t{1} << 62;
  std::int64_t elements = 0;
  if (rows > kLimit || cols > kLimit || __builtin_mul_overflow(rows, cols, &elements) || elements > kLimit)
    throw std::invalid_argument("tensor shape " + std::to_string(rows) + "x" + std::to_string(cols) +
                                " is too large (more than 2^62 elements)");
  check_rule_serves_format(config.scale_rule, config.format);
  QuantizedTensor q;
  q.rows = rows;
  q.cols = cols;
  q.config = config;
  q.tile_rows = config.granularity.tile_rows(rows);
  q.tile_cols = config.granularity.tile_cols(cols);
  q.scale_rows = (rows + q.tile_rows - 1) / q.tile_rows;
  q.scale_cols = (cols + q.tile_cols - 1) / q.tile_cols;
  check_rule_serves_tiles(config.scale_rule, config.granularity.tile_rows(rows), q.tile_cols,
                          config.rounding.mode == RoundingMode::stochastic);
  q.codes.assign(static_cast<std::size_t>(elements), 0);
  q.scales.assign(static_cast<std::size_t>(q.scale_rows * q.scale_cols), 1.0f);
  return q;
}

}  // namespace fp8lab
