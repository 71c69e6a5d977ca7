#include "data/layer_catalog.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <toml++/toml.h>

namespace fp8lab {

std::filesystem::path layer_catalog_path() {
  // The catalog ships with the code; a data folder (which holds checkpoints) may replace it.
  if (const char* dir = std::getenv("FP8LAB_DATA_DIR"); dir && *dir) {
    const std::filesystem::path replacement = std::filesystem::path(dir) / "layer_catalog.toml";
    std::error_code ignored;
    if (std::filesystem::is_regular_file(replacement, ignored)) return replacement;
  }
  return std::filesystem::path(FP8LAB_SOURCE_DIR) / "data" / "layer_catalog.toml";
}

std::vector<LayerShape> load_layer_catalog(const std::filesystem::path& file) {
  toml::table table;
  try {
    table = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(file.string() + ":" + std::to_string(e.source().begin.line) + ":" +
                                std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  std::vector<LayerShape> layers;
  const toml::array* entries = table["layer"].as_array();
  if (!entries) throw std::invalid_argument(file.string() + ": no [[layer]] entries");
  for (const toml::node& node : *entries) {
    const toml::table* t = node.as_table();
    LayerShape l;
    if (t) {
      l.name = t->get("name") ? t->get("name")->value_or(std::string()) : "";
      l.out_features = t->get("out_features") ? t->get("out_features")->value_or<std::int64_t>(0) : 0;
      l.in_features = t->get("in_features") ? t->get("in_features")->value_or<std::int64_t>(0) : 0;
      l.source = t->get("source") ? t->get("source")->value_or(std::string()) : "";
    }
    if (l.name.empty() || l.out_features <= 0 || l.in_features <= 0)
      throw std::invalid_argument(file.string() + ":" + std::to_string(node.source().begin.line) +
                                  ": a [[layer]] needs name, out_features > 0 and in_features > 0");
    layers.push_back(l);
  }
  return layers;
}

LayerShape find_layer(const std::string& name, const std::vector<LayerShape>& catalog) {
  if (name.starts_with("shape:")) {
    const std::string_view extent = std::string_view(name).substr(6);
    const std::size_t x = extent.find('x');
    std::int64_t n = 0, k = 0;
    const bool ok = x != std::string_view::npos &&
                    std::from_chars(extent.data(), extent.data() + x, n).ec == std::errc() &&
                    std::from_chars(extent.data() + x + 1, extent.data() + extent.size(), k).ec == std::errc() &&
                    n > 0 && k > 0;
    if (!ok) throw std::invalid_argument("layer '" + name + "' is not shape:NxK with positive N and K");
    return {name, n, k, "synthetic shape"};
  }
  for (const LayerShape& l : catalog)
    if (l.name == name) return l;
  throw std::invalid_argument("layer '" + name + "' is not in the catalog (fp8lab layers lists it) nor shape:NxK");
}

}  // namespace fp8lab
