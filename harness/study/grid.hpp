#pragma once
// The grid of a study: the product of its axes, in the kind's axis order (the last axis
// varies fastest), every value validated against the kind with its position in the file.
#include <vector>

#include "harness/study/study_kind.hpp"

namespace fp8lab {

std::vector<Point> expand_grid(const StudySpec& spec, const StudyKind& kind);

}  // namespace fp8lab
