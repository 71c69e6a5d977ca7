// .safetensors: tensors by name, the FP8 and BF16 dtypes, and malformed files.
#include <catch2/catch.hpp>
#include <cstring>

#include "data/tensor_io/safetensors.hpp"
#include "tests/support/temp_dir.hpp"

using namespace fp8lab;
using test::TempDir;

namespace {

std::string safetensors(const std::string& json, const std::string& data, std::uint64_t header_length_override = 0) {
  const std::uint64_t n = header_length_override ? header_length_override : json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string bytes_of(const void* p, std::size_t n) { return {static_cast<const char*>(p), n}; }

void check_error(const std::filesystem::path& file, const std::string& name, const std::string& fragment) {
  try {
    read_safetensors(file, name);
    FAIL("no error for " << file);
  } catch (const TensorFileError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find(file.string()) == 0);
    CHECK(message.find(fragment) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

}  // namespace

TEST_CASE("safetensors: F32, BF16, F8_E4M3, F8_E5M2 and F16 tensors by name") {
  TempDir dir;
  const float f32[2] = {1.5f, -2.0f};
  const std::uint16_t bf16[2] = {0x3F80, 0x4040};  // 1, 3
  const std::uint8_t e4m3[2] = {0x7E, 0x01};        // 448, 2^-9
  const std::uint8_t e5m2[1] = {0x7B};              // 57344
  const std::uint16_t f16[1] = {0x3C00};            // 1
  const std::string data =
      bytes_of(f32, 8) + bytes_of(bf16, 4) + bytes_of(e4m3, 2) + bytes_of(e5m2, 1) + bytes_of(f16, 2);
  const std::string json =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
      R"("c":{"dtype":"F8_E4M3","shape":[2,1],"data_offsets":[12,14]},)"
      R"("d":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[14,15]},)"
      R"("e":{"dtype":"F16","shape":[1],"data_offsets":[15,17]}})";
  test::write_bytes(dir / "m.safetensors", safetensors(json, data));
  const auto file = dir / "m.safetensors";
  CHECK(read_safetensors(file, "a").to_float32(file) == std::vector<float>{1.5f, -2.0f});
  CHECK(read_safetensors(file, "b").to_float32(file) == std::vector<float>{1.0f, 3.0f});
  const Tensor c = read_safetensors(file, "c");
  CHECK(c.shape == std::vector<std::int64_t>{2, 1});
  CHECK(c.to_float32(file) == std::vector<float>{448.0f, 0x1p-9f});
  CHECK(read_safetensors(file, "d").to_float32(file) == std::vector<float>{57344.0f});
  CHECK(read_safetensors(file, "e").to_float32(file) == std::vector<float>{1.0f});
  CHECK(safetensors_names(file) == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(read_tensor_file(file, "a").dtype == DType::f32);
}

TEST_CASE("safetensors: a one-tensor file needs no name, a many-tensor file lists its names") {
  TempDir dir;
  const float f32[1] = {7.0f};
  test::write_bytes(dir / "one.safetensors",
                    safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", bytes_of(f32, 4)));
  CHECK(read_safetensors(dir / "one.safetensors", "").to_float32(dir / "one.safetensors") == std::vector<float>{7.0f});
  test::write_bytes(dir / "two.safetensors",
                    safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("v":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                bytes_of(f32, 4)));
  check_error(dir / "two.safetensors", "", "holds 2 tensors; pick one with --name");
  check_error(dir / "two.safetensors", "q", "no tensor named 'q' (has: v, w)");
}

TEST_CASE("safetensors: malformed files give one-line errors naming the file and the field") {
  TempDir dir;
  const std::string four_floats(16, '\0');
  const std::string good = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";

  test::write_bytes(dir / "short.safetensors", "abc");
  check_error(dir / "short.safetensors", "w", "truncated");

  test::write_bytes(dir / "hlen.safetensors", safetensors(good, four_floats, 1u << 30));
  check_error(dir / "hlen.safetensors", "w", "header length 1073741824 exceeds");

  test::write_bytes(dir / "data.safetensors", safetensors(good, four_floats.substr(0, 10)));
  check_error(dir / "data.safetensors", "w", "truncated: tensor 'w' ends at data byte 16");

  test::write_bytes(dir / "json.safetensors", safetensors(R"({"w": {"dtype": "F32",)", four_floats));
  check_error(dir / "json.safetensors", "w", "bad header: JSON error");

  test::write_bytes(dir / "dtype.safetensors",
                    safetensors(R"({"w":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})", four_floats));
  check_error(dir / "dtype.safetensors", "w", "unsupported dtype 'I32'");

  test::write_bytes(dir / "shape.safetensors",
                    safetensors(R"({"w":{"dtype":"F32","shape":[3,2],"data_offsets":[0,16]}})", four_floats));
  check_error(dir / "shape.safetensors", "w", "field 'shape' 3x2 of f32 needs 24 bytes but data_offsets span 16");

  test::write_bytes(dir / "offsets.safetensors",
                    safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", four_floats));
  check_error(dir / "offsets.safetensors", "w", "field 'data_offsets' has begin > end");

  test::write_bytes(dir / "noshape.safetensors", safetensors(R"({"w":{"dtype":"F32","data_offsets":[0,16]}})", four_floats));
  check_error(dir / "noshape.safetensors", "w", "field 'shape' is missing");

  test::write_bytes(dir / "negshape.safetensors",
                    safetensors(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", four_floats));
  check_error(dir / "negshape.safetensors", "w", "field 'shape' holds a non-size entry -4");

  check_error(dir / "missing.safetensors", "w", "cannot open");
}
