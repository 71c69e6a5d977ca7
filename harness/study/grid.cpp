#include "harness/study/grid.hpp"

#include <stdexcept>

namespace fp8lab {

const std::string& Point::at(const std::string& axis) const {
  for (const auto& [name, value] : values)
    if (name == axis) return value;
  throw std::logic_error("grid point has no axis '" + axis + "'");
}

std::string Point::key() const {
  std::string k;
  for (const auto& [name, value] : values) k += (k.empty() ? "" : ";") + name + "=" + value;
  return k;
}

std::vector<Point> expand_grid(const StudySpec& spec, const StudyKind& kind) {
  const std::vector<AxisDef> defs = kind.axes();
  for (const Axis& axis : spec.axes) {
    bool known = false;
    for (const AxisDef& d : defs) known = known || d.name == axis.name;
    if (!known) {
      std::string names;
      for (const AxisDef& d : defs) names += (names.empty() ? "" : ", ") + d.name;
      throw spec.error("axes." + axis.name, "unknown axis for study kind '" + kind.name() + "' (axes: " + names + ")",
                       &axis.positions.front());
    }
    for (std::size_t i = 0; i < axis.values.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j)
        if (axis.values[j] == axis.values[i])
          throw spec.error("axes." + axis.name, "value '" + axis.values[i] + "' is listed twice", &axis.positions[i]);
      try {
        kind.validate_value(axis.name, axis.values[i]);
      } catch (const std::invalid_argument& e) {
        throw spec.error("axes." + axis.name, e.what(), &axis.positions[i]);
      }
    }
  }
  const std::vector<std::vector<std::string>> values = axis_values(spec, kind);
  std::size_t count = 1;
  for (const std::vector<std::string>& v : values)
    if (__builtin_mul_overflow(count, v.size(), &count) || count > kMaxGridPoints)
      throw spec.error("axes", "the grid (the product of the axes) has more than " + std::to_string(kMaxGridPoints) +
                                   " points; split the study");
  std::vector<Point> points(1);
  for (std::size_t a = 0; a < defs.size(); ++a) {
    std::vector<Point> next;
    for (const Point& p : points)
      for (const std::string& v : values[a]) {
        Point q = p;
        q.values.emplace_back(defs[a].name, v);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

std::vector<std::vector<std::string>> axis_values(const StudySpec& spec, const StudyKind& kind) {
  std::vector<std::vector<std::string>> values;
  for (const AxisDef& d : kind.axes()) {
    std::vector<std::string> v = d.defaults;
    for (const Axis& axis : spec.axes)
      if (axis.name == d.name) v = axis.values;
    values.push_back(v);
  }
  return values;
}

}  // namespace fp8lab
