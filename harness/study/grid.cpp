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
  const std::vector<GridDimension> dimensions = grid_dimensions(spec, kind);
  std::size_t count = 1;
  for (const GridDimension& d : dimensions)
    if (__builtin_mul_overflow(count, d.entries.size(), &count) || count > kMaxGridPoints)
      throw spec.error("axes", "the grid (the product of the axes) has more than " + std::to_string(kMaxGridPoints) +
                                   " points; split the study");
  std::vector<Point> points(1);
  for (const GridDimension& d : dimensions) {
    std::vector<Point> next;
    for (const Point& p : points)
      for (const GridEntry& entry : d.entries) {
        Point q = p;
        q.values.insert(q.values.end(), entry.values.begin(), entry.values.end());
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

namespace fp8lab {
namespace {

bool applies(const AxisDef& parameter, const std::string& owner_value) {
  for (const std::string& v : parameter.parameter_of->values)
    if (v == owner_value) return true;
  return false;
}

// Every combination of the parameters' values (last fastest), as "name=value" pairs.
std::vector<std::vector<std::pair<std::string, std::string>>> combinations(
    const std::vector<AxisDef>& defs, const std::vector<std::vector<std::string>>& values,
    const std::vector<std::size_t>& parameters) {
  std::vector<std::vector<std::pair<std::string, std::string>>> all(1);
  for (std::size_t p : parameters) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& partial : all)
      for (const std::string& v : values[p]) {
        next.push_back(partial);
        next.back().emplace_back(defs[p].name, v);
        if (next.size() > kMaxGridPoints) return next;  // expand_grid reports the grid too large
      }
    all = std::move(next);
  }
  return all;
}

}  // namespace

std::vector<GridDimension> grid_dimensions(const StudySpec& spec, const StudyKind& kind) {
  const std::vector<AxisDef> defs = kind.axes();
  const std::vector<std::vector<std::string>> values = axis_values(spec, kind);
  std::vector<GridDimension> dimensions;
  for (std::size_t a = 0; a < defs.size(); ++a)
    if (!defs[a].parameter_of) dimensions.push_back({a, {}, {}});
  for (std::size_t a = 0; a < defs.size(); ++a) {
    if (!defs[a].parameter_of) continue;
    if (defs[a].storage != AxisStorage::integer)
      throw std::logic_error("parameter axis '" + defs[a].name + "' is not stored as an integer");
    GridDimension* owner = nullptr;
    for (GridDimension& d : dimensions)
      if (defs[d.axis].name == defs[a].parameter_of->axis) owner = &d;
    if (!owner)
      throw std::logic_error("parameter axis '" + defs[a].name + "' names no owner axis '" +
                             defs[a].parameter_of->axis + "'");
    owner->parameters.push_back(a);
  }
  for (GridDimension& d : dimensions) {
    const std::string& name = defs[d.axis].name;
    for (const std::string& v : values[d.axis]) {
      if (d.entries.size() > kMaxGridPoints) break;  // expand_grid reports the grid too large
      std::vector<std::size_t> applying;
      for (std::size_t p : d.parameters)
        if (applies(defs[p], v)) applying.push_back(p);
      if (applying.empty()) {
        d.entries.push_back({v, {{name, v}}});
        continue;
      }
      for (const auto& parameters : combinations(defs, values, applying)) {
        GridEntry entry{v + "[", {{name, v}}};
        for (std::size_t i = 0; i < parameters.size(); ++i)
          entry.label += (i ? "," : "") + parameters[i].first + "=" + parameters[i].second;
        entry.label += "]";
        entry.values.insert(entry.values.end(), parameters.begin(), parameters.end());
        d.entries.push_back(std::move(entry));
      }
    }
  }
  return dimensions;
}

}  // namespace fp8lab
