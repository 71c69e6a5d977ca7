#pragma once
// The catalog of real model GEMM shapes (data/layer_catalog.toml) and synthetic layers:
// "shape:NxK" names an out_features x in_features layer of any size.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace fp8lab {

struct LayerShape {
  std::string name;
  std::int64_t out_features = 0;  // N
  std::int64_t in_features = 0;   // K
  std::string source;
};

// The catalog file: $FP8LAB_DATA_DIR/layer_catalog.toml when that file exists, else the one
// that ships with the code (the source tree's data/): a data folder need not carry it.
std::filesystem::path layer_catalog_path();
std::vector<LayerShape> load_layer_catalog(const std::filesystem::path& file = layer_catalog_path());

// A catalog name or "shape:NxK"; throws std::invalid_argument naming the layer.
LayerShape find_layer(const std::string& name, const std::vector<LayerShape>& catalog);

}  // namespace fp8lab
