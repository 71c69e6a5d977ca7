#pragma once
// The tensors of the formats study (harness/study/formats_study.cpp), each with its FP32 values
// (what the quantizer sees) and FP64 values (what its error is measured against):
//   "<linear>.W"   stories260K's weight of a linear layer (out x in, FP32 in the checkpoint, so
//                  both sides are equal), role "weight";
//   "<linear>.X"   that layer's input on the real prompt (T x in) and
//   "<linear>.dY"  its output gradient (T x out), from the FP64 forward/backward of
//                  harness/study/real_layers, rounded once to FP32; roles "activation" and "gradient";
//   "outliers"     a synthetic tensor (data/synthetic_tensors.hpp) with outlier columns, role
//                  "activation"; its FP64 side is its FP32 values.
// <linear> is L0..L4 .wq .wk .wv .wo .w1 .w2 .w3, or classifier (whose W is the tied embedding).
#include <cstdint>
#include <string>
#include <vector>

#include "data/synthetic_tensors.hpp"

namespace fp8lab {

inline constexpr const char* kOutliersTensor = "outliers";

struct FormatsTensor {
  std::string name, role;  // role: weight, activation or gradient
  std::int64_t rows = 0, cols = 0;
  std::vector<float> fp32;
  std::vector<double> fp64;
  float amax = 0.0f;   // of fp32
  std::string source;  // provenance, with the checkpoint's path and sha256 for real tensors
};

// The real tensors, built once per process from stories260k_layers(); throws
// std::invalid_argument naming the value and listing what exists.
const FormatsTensor& find_real_formats_tensor(const std::string& name);
std::vector<std::string> real_formats_tensor_names();

// Throws PointFailure when an element is not finite in FP32 (an outlier_scale too large).
FormatsTensor make_outliers_tensor(const SyntheticSpec& spec);
std::string outliers_provenance(const SyntheticSpec& spec);

}  // namespace fp8lab
