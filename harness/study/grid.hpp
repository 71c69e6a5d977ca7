#pragma once
// The grid of a study: the product of its dimensions, in the kind's axis order (the last
// varies fastest), every value validated against the kind with its position in the file.
//
// A dimension is an axis of the kind. A parameter axis (AxisDef::parameter_of: `sigma` and
// `seed` of the loss-scaling study's "lognormal" tensor) is not one: it is folded into its owner
// axis, which gets one entry per value the parameters do not apply to ("L0.wq.dW") and one per
// combination of the parameters' values where they do ("lognormal[sigma=2,seed=1]", parameters
// in axis order, the last fastest). So a study whose axes do not form a full grid stores only
// the cells that mean something; the results file keeps each parameter's value as a coordinate
// along the owner's dimension (harness/study/runner.cpp, results/README.md).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "harness/study/study_kind.hpp"

namespace fp8lab {

inline constexpr std::size_t kMaxGridPoints = 1'000'000;

// One entry of a dimension: its label in the results file, and the axis values it stands for
// (the dimension's own axis first, then the parameters that apply to it).
struct GridEntry {
  std::string label;
  std::vector<std::pair<std::string, std::string>> values;
};

struct GridDimension {
  std::size_t axis = 0;                 // index into kind.axes()
  std::vector<std::size_t> parameters;  // indices into kind.axes() of its parameter axes
  std::vector<GridEntry> entries;
};

// Throws SpecError naming the axis for an unknown axis, a bad or repeated value, or a grid
// larger than kMaxGridPoints. Points come in the order of the results file's elements.
std::vector<Point> expand_grid(const StudySpec& spec, const StudyKind& kind);

// The values of every axis of the kind (the spec's, else the kind's defaults), in axis order.
// Checks nothing: expand_grid does.
std::vector<std::vector<std::string>> axis_values(const StudySpec& spec, const StudyKind& kind);

// The dimensions of the grid, in the kind's axis order; their entries' product is the grid.
// Checks nothing but the kind's own consistency (std::logic_error: a parameter axis whose owner
// is no axis or is itself a parameter, or that is not stored as an integer).
std::vector<GridDimension> grid_dimensions(const StudySpec& spec, const StudyKind& kind);

}  // namespace fp8lab
