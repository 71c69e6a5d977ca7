#pragma once
// The operands of the gemm study's points (harness/study/gemm_study.cpp): X (tokens x in),
// W (out x in) and dY (tokens x out) of the point's layer, from one of three sources:
//   a catalog name or shape:NxK  synthetic (data/synthetic_tensors.hpp): X from the point's
//                                `distribution` with outlier channels, W from
//                                `operands.weight_distribution` ("same": X's) / sqrt(in), dY
//                                Gaussian; seeds 3 seed + 0, 1, 2 for X, W, dY;
//   stories260K/...              the checkpoint's real tensors (harness/study/real_layers.hpp),
//                                rounded once to FP32;
//   tensors                      the files of the spec's [tensors] table (x, w and optionally
//                                dy), read and checked before the sweep starts.
// The operands are kept while consecutive points share layer, distribution and seed, so the
// synthesis or the conversion runs once for all of them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/layer_catalog.hpp"
#include "harness/study/study_kind.hpp"

namespace fp8lab {

inline constexpr const char* kGemmTensorsLayer = "tensors";

// [operands] of the spec: how synthetic layers are generated.
struct GemmSyntheticSettings {
  std::int64_t tokens = 256, outlier_channels = 0;
  double outlier_scale = 100.0;
  std::string weight_distribution = "gaussian";  // or "same": X's distribution
};

struct GemmLayerDims {
  std::int64_t out, in, tokens;
};

// X, W, dY of one layer, shared by every point on it; transposes made once, when first needed.
struct GemmOperands {
  std::string key;
  std::vector<float> x, w, dy;
  GemmLayerDims dims{};
  std::vector<float> x_t, w_t, dy_t;
  const std::vector<float>& transposed(const std::vector<float>& m, std::vector<float>& cache, std::int64_t rows,
                                       std::int64_t cols);
};

class GemmStudyOperands {
 public:
  GemmStudyOperands() : catalog_(load_layer_catalog()) {}

  static bool is_real(const std::string& layer);
  static bool is_synthetic(const std::string& layer);

  void set_synthetic(const GemmSyntheticSettings& settings) { synthetic_ = settings; }
  const GemmSyntheticSettings& synthetic() const { return synthetic_; }
  // [tensors]: every file read, checked finite and shape-consistent; throws the spec's error.
  void load_own_tensors(const StudySpec& spec);
  bool has_own_tensors() const { return own_.has_value(); }
  bool own_tensors_have_dy() const { return own_ && !own_->dy.empty(); }

  // A catalog name or shape:NxK; throws std::invalid_argument naming the layer.
  LayerShape catalog_layer(const std::string& layer) const { return find_layer(layer, catalog_); }
  GemmLayerDims dims(const std::string& layer) const;
  GemmOperands& operands(const Point& p);
  // Where the point's X, W and dY come from, true for the point.
  std::string source_of(const Point& p) const;

 private:
  struct OwnTensors {
    std::vector<float> x, w, dy;
    GemmLayerDims dims{};
    std::string description;
  };

  std::vector<LayerShape> catalog_;
  GemmSyntheticSettings synthetic_;
  std::optional<OwnTensors> own_;
  GemmOperands cached_;
};

}  // namespace fp8lab
