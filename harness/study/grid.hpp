#pragma once
// The grid of a study: the product of its axes, in the kind's axis order (the last axis
// varies fastest), every value validated against the kind with its position in the file.
#include <vector>

#include "harness/study/study_kind.hpp"

namespace fp8lab {

inline constexpr std::size_t kMaxGridPoints = 1'000'000;

// Throws SpecError naming the axis for an unknown axis, a bad or repeated value, or a grid
// larger than kMaxGridPoints.
std::vector<Point> expand_grid(const StudySpec& spec, const StudyKind& kind);

// The values of every axis of the kind (the spec's, else the kind's defaults), in axis order;
// the grid is their product. Checks nothing: expand_grid does.
std::vector<std::vector<std::string>> axis_values(const StudySpec& spec, const StudyKind& kind);

}  // namespace fp8lab
