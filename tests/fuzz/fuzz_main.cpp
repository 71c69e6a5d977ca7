// A deterministic mutation fuzzer for the targets of fuzz_targets.hpp, built with g++ (no
// clang or libFuzzer needed). From a seed corpus it derives inputs by stacked byte-level
// mutations (bit flips, interesting bytes and numbers, deletions, duplications, dictionary
// tokens, splices, and a fix-up of the length field the format starts with), drawn from
// std::mt19937_64 with a fixed seed: the same command finds the same inputs on any machine.
//
//   fp8lab_fuzz TARGET CORPUS_DIR [--runs N] [--seconds S] [--seed N] [--max-len BYTES]
//
// TARGET is npy, safetensors or spec. It stops after N inputs or S seconds, whichever comes
// first. A finding (an exception the CLI would report as an internal error) prints the
// input's file and exits 1; a sanitizer report (preset asan) does the same through the death
// callback. The input is written to ./fuzz-finding-TARGET-<run>.bin for replay:
//   fp8lab_fuzz TARGET FILE --runs 0   # runs the corpus (here: that one file) only
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.hpp"

extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

using Bytes = std::vector<std::uint8_t>;
using Target = int (*)(const std::uint8_t*, std::size_t);

std::string g_target_name;
Bytes g_current;
long long g_run = 0;

std::string save_current() {
  const std::string name = "fuzz-finding-" + g_target_name + "-" + std::to_string(g_run) + ".bin";
  std::ofstream(name, std::ios::binary).write(reinterpret_cast<const char*>(g_current.data()),
                                              static_cast<std::streamsize>(g_current.size()));
  return name;
}

void on_sanitizer_death() { std::fprintf(stderr, "fp8lab_fuzz: input saved as %s\n", save_current().c_str()); }

const std::vector<std::string> kDictionary = {
    "\x93NUMPY", "{'descr': ", "'<f4'", "'<f8'", "'<f2'", "'|u1'", "'<u2'", "[('bf16', '<u2')]", "'fortran_order': ",
    "False", "True", "'shape': (", "), }", ",", "(", ")", "{", "}", "[", "]", "\"", "'", ":",
    "\"dtype\":", "\"F32\"", "\"BF16\"", "\"F8_E4M3\"", "\"U8\"", "\"shape\":", "\"data_offsets\":", "\"__metadata__\"",
    "[study]", "[axes]", "[operands]", "[sampling]", "[tensors]", "name = ", "kind = \"gemm\"", "layer = ",
    "\"shape:1024x1024\"", "\"shape:0x5\"", "\"tensors\"", "\"stories260K/layers.0.wq\"", "\"deepseek-v3/o_proj\"",
    "gemm = [\"fprop\", \"dgrad\", \"wgrad\"]", "a_granularity = ", "\"tile:1x128\"", "\"block:128x128\"", "\"row\"",
    "\"tensor\"", "promotion = ", "\"never\"", "accum = ", "\"bits:16,depth:16,round:rne\"", "format = ",
    "\"e5m2\"", "tokens = ", "outlier_scale = ", "outlier_channels = ", "seed = ", "x = \"x.npy\"", "rows = ",
    "[[", "]]", "=", "\n", "\"\"\"", "inf", "nan", "-0", "1e400", "0x7f", "9223372036854775807",
    "9223372036854775808", "18446744073709551615", "4611686018427387904", "-1", "0", "65536", "1e39", "3e38"};

const std::vector<std::string> kNumbers = {"0",  "1", "-1", "2", "31", "32", "128", "4096", "65535", "2147483648",
                                           "4611686018427387904", "9223372036854775807", "18446744073709551615",
                                           "99999999999999999999999", "1e400", "1e39", "nan", "inf", "-9223372036854775808"};

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }

  Bytes mutate(Bytes x, const std::vector<Bytes>& corpus, const std::string& target, std::size_t max_len) {
    const std::size_t steps = 1 + below(6);
    for (std::size_t s = 0; s < steps; ++s) step(x, corpus);
    if (x.size() > max_len) x.resize(max_len);
    if (below(2) == 0) fix_length_field(x, target);
    return x;
  }

 private:
  void insert(Bytes& x, std::size_t at, const std::string& text) {
    x.insert(x.begin() + static_cast<std::ptrdiff_t>(std::min(at, x.size())), text.begin(), text.end());
  }

  void step(Bytes& x, const std::vector<Bytes>& corpus) {
    static const std::uint8_t kInteresting[] = {0, 1, 0x7F, 0x80, 0xFF, '0', '9', ',', '(', ')', '[', ']',
                                                '{', '}', '"', '\'', ' ', '\n', '=', '.', '-', 'e', 'x', ':'};
    switch (below(9)) {
      case 0:
        if (!x.empty()) x[below(x.size())] ^= static_cast<std::uint8_t>(1u << below(8));
        break;
      case 1:
        if (!x.empty()) x[below(x.size())] = kInteresting[below(sizeof kInteresting)];
        break;
      case 2:
        if (!x.empty()) {
          const std::size_t at = below(x.size()), n = 1 + below(std::min<std::size_t>(16, x.size() - at));
          x.erase(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      case 3:
        if (!x.empty()) {
          const std::size_t at = below(x.size()), n = 1 + below(std::min<std::size_t>(64, x.size() - at));
          const Bytes chunk(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + n));
          x.insert(x.begin() + static_cast<std::ptrdiff_t>(below(x.size() + 1)), chunk.begin(), chunk.end());
        }
        break;
      case 4: insert(x, below(x.size() + 1), kDictionary[below(kDictionary.size())]); break;
      case 5: {  // a run of digits becomes an interesting number
        std::vector<std::size_t> starts;
        for (std::size_t i = 0; i < x.size(); ++i)
          if (std::isdigit(x[i]) && (i == 0 || !std::isdigit(x[i - 1]))) starts.push_back(i);
        if (starts.empty()) break;
        const std::size_t at = starts[below(starts.size())];
        std::size_t end = at;
        while (end < x.size() && std::isdigit(x[end])) ++end;
        x.erase(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(end));
        insert(x, at, kNumbers[below(kNumbers.size())]);
        break;
      }
      case 6:
        if (!x.empty()) x.resize(below(x.size()));
        break;
      case 7: {  // splice: a prefix of x and a suffix of another corpus entry
        const Bytes& other = corpus[below(corpus.size())];
        if (x.empty() || other.empty()) break;
        const std::size_t cut = below(x.size()), from = below(other.size());
        x.resize(cut);
        x.insert(x.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      default: {  // overwrite 1..8 bytes with random ones
        if (x.empty()) break;
        const std::size_t at = below(x.size());
        for (std::size_t i = at; i < x.size() && i < at + 1 + below(8); ++i) x[i] = static_cast<std::uint8_t>(rng_());
      }
    }
  }

  // Keep the length prefix consistent with the text so that mutations reach the header parser.
  static void fix_length_field(Bytes& x, const std::string& target) {
    if (target == "npy" && x.size() >= 10 && x[6] == 1) {
      const auto newline = std::find(x.begin() + 10, x.end(), '\n');
      if (newline == x.end()) return;
      const auto length = static_cast<std::size_t>(newline - x.begin()) - 9;
      x[8] = static_cast<std::uint8_t>(length & 0xFF);
      x[9] = static_cast<std::uint8_t>((length >> 8) & 0xFF);
    } else if (target == "safetensors" && x.size() > 8) {
      // The header ends at the last '}' of the JSON text (the data that follows is binary).
      std::size_t end = 0;
      for (std::size_t i = 8; i < x.size() && x[i] >= 0x09 && x[i] < 0x7F; ++i)
        if (x[i] == '}') end = i + 1;
      if (end == 0) return;
      const std::uint64_t length = end - 8;
      std::memcpy(x.data(), &length, 8);
    }
  }

  std::mt19937_64 rng_;
};

std::vector<Bytes> load_corpus(const std::filesystem::path& where) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(where)) {
    for (const auto& e : std::filesystem::directory_iterator(where))
      if (e.is_regular_file()) files.push_back(e.path());
  } else {
    files.push_back(where);
  }
  std::sort(files.begin(), files.end());  // directory order differs between machines
  std::vector<Bytes> corpus;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return corpus;
}

int usage() {
  std::fprintf(stderr,
               "usage: fp8lab_fuzz npy|safetensors|spec CORPUS_DIR [--runs N] [--seconds S] [--seed N] [--max-len B]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  g_target_name = argv[1];
  const Target target = g_target_name == "npy"           ? fp8lab::fuzz::npy_target
                        : g_target_name == "safetensors" ? fp8lab::fuzz::safetensors_target
                        : g_target_name == "spec"        ? fp8lab::fuzz::spec_target
                                                         : nullptr;
  if (!target) return usage();
  long long runs = 10000;
  double seconds = 1e9;
  std::uint64_t seed = 1;
  std::size_t max_len = 4096;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--runs") runs = std::stoll(value);
    else if (flag == "--seconds") seconds = std::stod(value);
    else if (flag == "--seed") seed = std::stoull(value);
    else if (flag == "--max-len") max_len = std::stoull(value);
    else return usage();
  }
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_sanitizer_death);
  const std::vector<Bytes> corpus = load_corpus(argv[2]);
  if (corpus.empty()) {
    std::fprintf(stderr, "fp8lab_fuzz: no seed inputs in %s\n", argv[2]);
    return 2;
  }
  Mutator mutator(seed);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  try {
    for (const Bytes& input : corpus) {  // the seeds themselves first
      g_current = input;
      target(g_current.data(), g_current.size());
    }
    for (g_run = 1; g_run <= runs && elapsed() < seconds; ++g_run) {
      g_current = mutator.mutate(corpus[mutator.below(corpus.size())], corpus, g_target_name, max_len);
      target(g_current.data(), g_current.size());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8lab_fuzz: %s: finding at run %lld: %s; input saved as %s\n", g_target_name.c_str(), g_run,
                 e.what(), save_current().c_str());
    return 1;
  }
  std::printf("fp8lab_fuzz: %s: %zu seeds + %lld mutated inputs in %.1f s (seed %llu), no finding\n",
              g_target_name.c_str(), corpus.size(), std::min(g_run - 1, runs), elapsed(),
              static_cast<unsigned long long>(seed));
  return 0;
}
