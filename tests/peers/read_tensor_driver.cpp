// fp8lab's tensor readers, for the peers test readers_test.py (files written by numpy.save and
// safetensors.torch.save_file):
//   read_tensor_driver FILE NAME OUT_PREFIX      (NAME "-" for a .npy)
// reads FILE with read_tensor_file() and writes OUT_PREFIX.txt ("DTYPE DIM DIM ..."),
// OUT_PREFIX.raw (the tensor's bytes as read) and, when the dtype is a number type,
// OUT_PREFIX.f32 (Tensor::to_float32(), the values the quantizers see).
// A file the reader refuses: its one-line message on stderr, exit 2.
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "data/tensor_io/tensor.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: read_tensor_driver FILE NAME|- OUT_PREFIX\n");
    return 2;
  }
  const std::string name = argv[2] == std::string("-") ? "" : argv[2], prefix = argv[3];
  try {
    const fp8lab::Tensor t = fp8lab::read_tensor_file(argv[1], name);
    std::ofstream meta(prefix + ".txt");
    meta << fp8lab::dtype_name(t.dtype);
    for (const auto d : t.shape) meta << ' ' << d;
    meta << '\n';
    std::ofstream(prefix + ".raw", std::ios::binary)
        .write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    if (t.dtype != fp8lab::DType::u8 && t.dtype != fp8lab::DType::u16) {
      const std::vector<float> values = t.to_float32(argv[1]);
      std::ofstream(prefix + ".f32", std::ios::binary)
          .write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
