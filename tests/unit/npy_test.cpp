// .npy: round trips, NumPy-written headers (v1 and v2), and every malformed-file case
// giving a one-line error that names the file.
#include <catch2/catch.hpp>
#include <cstring>

#include "data/tensor_io/npy.hpp"
#include "tests/support/temp_dir.hpp"

using namespace fp8lab;
using test::TempDir;

namespace {

// A .npy file as NumPy 1.x writes it: v1.0, header padded with spaces to 64 bytes.
std::string npy_v1(const std::string& dict, std::string_view data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data);
}

std::string floats(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

void check_one_line_error(const std::filesystem::path& file, const std::string& expected_fragment) {
  try {
    read_npy(file);
    FAIL("no error for " << file);
  } catch (const TensorFileError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find(file.string()) == 0);
    CHECK(message.find(expected_fragment) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

}  // namespace

TEST_CASE("npy: f32, u8, bf16 round-trip through write_npy and read_npy") {
  TempDir dir;
  const Tensor f = Tensor::from_f32({2, 3}, {1, -2, 3.5f, 0, 1e-30f, 448});
  write_npy(dir / "f.npy", f);
  const Tensor f2 = read_npy(dir / "f.npy");
  CHECK(f2.dtype == DType::f32);
  CHECK(f2.shape == std::vector<std::int64_t>{2, 3});
  CHECK(f2.bytes == f.bytes);

  const Tensor u = Tensor::from_u8({5}, {0, 1, 0x7E, 0x80, 0xFF});
  write_npy(dir / "u.npy", u);
  const Tensor u2 = read_npy(dir / "u.npy");
  CHECK(u2.dtype == DType::u8);
  CHECK(u2.shape == std::vector<std::int64_t>{5});
  CHECK(u2.bytes == u.bytes);

  const Tensor b = Tensor::from_bf16_bits({1, 2}, {0x3F80, 0xC040});  // 1.0, -3.0
  write_npy(dir / "b.npy", b);
  const Tensor b2 = read_npy(dir / "b.npy");
  CHECK(b2.dtype == DType::bf16);
  CHECK(b2.to_float32(dir / "b.npy") == std::vector<float>{1.0f, -3.0f});
  CHECK(test::read_bytes(dir / "b.npy").find("[('bf16', '<u2')]") != std::string::npos);
}

TEST_CASE("npy: reads headers as NumPy writes them (v1.0 and v2.0, f64 and f16)") {
  TempDir dir;
  test::write_bytes(dir / "v1.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                           floats({1, 2, 3, 4})));
  const Tensor v1 = read_npy(dir / "v1.npy");
  CHECK(v1.to_float32(dir / "v1.npy") == std::vector<float>{1, 2, 3, 4});

  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
  header.append((64 - (12 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string v2("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) v2 += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  const double d[3] = {0.1, -2.0, 1e300};
  v2 += header + std::string(reinterpret_cast<const char*>(d), sizeof d);
  test::write_bytes(dir / "v2.npy", v2);
  const Tensor t2 = read_npy(dir / "v2.npy");
  CHECK(t2.dtype == DType::f64);
  CHECK(t2.shape == std::vector<std::int64_t>{3});

  const std::uint16_t h[2] = {0x3C00, 0xC000};  // fp16 1.0, -2.0
  test::write_bytes(dir / "h.npy", npy_v1("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                                          std::string_view(reinterpret_cast<const char*>(h), sizeof h)));
  CHECK(read_npy(dir / "h.npy").to_float32(dir / "h.npy") == std::vector<float>{1.0f, -2.0f});
}

TEST_CASE("npy: malformed files give one-line errors naming the file and the problem") {
  TempDir dir;
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";

  test::write_bytes(dir / "truncated_data.npy", npy_v1(good_dict, floats({1, 2, 3})));
  check_one_line_error(dir / "truncated_data.npy", "truncated");

  const std::string full = npy_v1(good_dict, floats({1, 2, 3, 4}));
  test::write_bytes(dir / "truncated_header.npy", full.substr(0, 30));
  check_one_line_error(dir / "truncated_header.npy", "truncated");

  test::write_bytes(dir / "too_long.npy", npy_v1(good_dict, floats({1, 2, 3, 4, 5})));
  check_one_line_error(dir / "too_long.npy", "shape does not match the data");

  test::write_bytes(dir / "magic.npy", "PK\x03\x04 this is a zip file");
  check_one_line_error(dir / "magic.npy", "bad magic");

  test::write_bytes(dir / "dict.npy", npy_v1("garbage garbage", ""));
  check_one_line_error(dir / "dict.npy", "bad header");

  test::write_bytes(dir / "noshape.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, }", ""));
  check_one_line_error(dir / "noshape.npy", "no 'shape' key");

  test::write_bytes(dir / "int64.npy", npy_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", "abcdefgh"));
  check_one_line_error(dir / "int64.npy", "unsupported dtype '<i8'");

  test::write_bytes(dir / "bigendian.npy", npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"));
  check_one_line_error(dir / "bigendian.npy", "unsupported dtype '>f4'");

  test::write_bytes(dir / "fortran.npy", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd"));
  check_one_line_error(dir / "fortran.npy", "fortran_order True");

  test::write_bytes(dir / "badshape.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", ""));
  check_one_line_error(dir / "badshape.npy", "is not a size");

  test::write_bytes(dir / "version.npy", std::string("\x93NUMPY\x09\x00\x00\x00", 10));
  check_one_line_error(dir / "version.npy", "unsupported .npy format version 9");

  check_one_line_error(dir / "missing.npy", "cannot open");
}

TEST_CASE("tensor: integer data is refused as floating point, with the bf16 hint") {
  TempDir dir;
  const Tensor u = Tensor::from_u8({2}, {1, 2});
  CHECK_THROWS_WITH(u.to_float32(dir / "u.npy"), Catch::Contains("holds integers") && Catch::Contains("bf16"));
  CHECK_THROWS_WITH(read_tensor_file(dir / "x.pt"), Catch::Contains("unknown tensor file type '.pt'"));
  write_npy(dir / "f.npy", Tensor::from_f32({1}, {1.0f}));
  CHECK_THROWS_WITH(read_tensor_file(dir / "f.npy", "w"), Catch::Contains("holds one tensor"));
}

TEST_CASE("npy: a failed write leaves no file behind and an existing file untouched") {
  TempDir dir;
  write_npy(dir / "keep.npy", Tensor::from_f32({1}, {42.0f}));
  const std::string before = test::read_bytes(dir / "keep.npy");
  CHECK_THROWS_AS(write_npy(dir / "no_such_dir" / "x.npy", Tensor::from_f32({1}, {1.0f})), TensorFileError);
  Tensor bad;
  bad.dtype = DType::e4m3;  // not writable as .npy
  CHECK_THROWS_WITH(write_npy(dir / "keep.npy", bad), Catch::Contains("cannot write dtype e4m3"));
  CHECK(test::read_bytes(dir / "keep.npy") == before);
}
