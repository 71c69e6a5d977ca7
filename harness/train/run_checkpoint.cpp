#include "harness/train/run_checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "data/sha256.hpp"
#include "harness/runtime/build_info.hpp"

namespace fp8lab::train {
namespace {

constexpr char kMagic[8] = {'F', 'P', '8', 'L', 'A', 'B', 'C', 'K'};
constexpr std::uint32_t kVersion = 3;  // 2: the build, and step records with resident_peak_bytes; 3: the seed techniques' per-step fields
constexpr std::size_t kHashBytes = 32;

class Writer {
 public:
  template <class T>
  void scalar(T value) {
    const auto* p = reinterpret_cast<const char*>(&value);
    bytes_.append(p, sizeof value);
  }
  void text(const std::string& s) {
    scalar<std::uint64_t>(s.size());
    bytes_ += s;
  }
  void floats(const std::vector<float>& values) {
    bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  void raw(const void* p, std::size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class Reader {
 public:
  Reader(const std::string& bytes, std::size_t end, const std::filesystem::path& file)
      : bytes_(bytes), end_(end), file_(file) {}
  template <class T>
  T scalar(const char* field) {
    T value;
    take(&value, sizeof value, field);
    return value;
  }
  std::string text(const char* field, std::size_t limit) {
    const auto n = scalar<std::uint64_t>(field);
    if (n > limit) fail(field, "length " + std::to_string(n) + " is implausible");
    std::string s(n, '\0');
    take(s.data(), n, field);
    return s;
  }
  std::vector<float> floats(std::uint64_t count, const char* field) {
    std::vector<float> v(count);
    take(v.data(), count * sizeof(float), field);
    return v;
  }
  bool at_end() const { return at_ == end_; }
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw CheckpointError("checkpoint " + file_.string() + ": field '" + field + "': " + what);
  }
  std::size_t left() const { return end_ - at_; }

 private:
  void take(void* to, std::size_t n, const char* field) {
    if (n > end_ - at_) fail(field, "the file ends early (truncated)");
    std::memcpy(to, bytes_.data() + at_, n);
    at_ += n;
  }
  const std::string& bytes_;
  std::size_t end_, at_ = 0;
  const std::filesystem::path& file_;
};

std::string hash_of(const std::string& bytes, std::size_t n) {
  Sha256 h;
  h.update(bytes.data(), n);
  return h.hex_digest();
}

std::string hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

[[noreturn]] void write_failed(const std::filesystem::path& file, const char* what) {
  throw CheckpointError("checkpoint " + file.string() + ": " + what + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& bytes, const std::filesystem::path& file) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) write_failed(file, "cannot write");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void write_checkpoint(const std::filesystem::path& file, const RunCheckpoint& c) {
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.scalar(kVersion);
  w.text(c.identity);
  w.text(c.build);
  w.scalar(c.next_step);
  w.scalar(c.updates);
  w.text(c.scaler.to_string());
  w.scalar<std::uint64_t>(c.records.size());
  for (const StepRecord& r : c.records) {
    for (const double f : step_record_fields(r)) w.scalar(f);
    w.scalar<std::uint64_t>(r.operand_stats.size());
    for (const GemmOperandTally& t : r.operand_stats) {
      w.text(t.layer);
      w.scalar(static_cast<std::uint8_t>(t.kind));
      for (const OperandTally* o : {&t.a, &t.b}) {
        w.scalar(o->signal);
        w.scalar(o->noise);
        w.scalar(o->elements);
        w.scalar(o->saturated);
        w.scalar(o->flushed);
      }
    }
  }
  w.scalar<std::uint64_t>(c.tensors.size());
  for (const TensorState& t : c.tensors) {
    if (t.m.size() != t.weights.size() || t.v.size() != t.weights.size())
      throw std::logic_error("write_checkpoint: moments of " + t.name + " differ in size from its weights");
    w.text(t.name);
    w.scalar<std::uint64_t>(t.weights.size());
    w.floats(t.weights);
    w.floats(t.m);
    w.floats(t.v);
  }
  w.scalar<std::uint64_t>(c.delayed.size());
  for (const DelayedOperandState& d : c.delayed) {
    w.text(d.key);
    w.scalar(static_cast<std::uint8_t>(d.config.format));
    w.scalar(d.config.history_length);
    w.scalar(static_cast<std::uint8_t>(d.config.reduction));
    w.scalar(static_cast<std::int32_t>(d.config.margin));
    w.floats(d.history);
    w.scalar(d.scale);
  }
  w.scalar<std::uint8_t>(c.controller ? 1 : 0);
  if (c.controller) {
    const PrecisionControllerState& s = *c.controller;
    if (s.streak.size() != s.high.size()) throw std::logic_error("write_checkpoint: controller flags and streaks differ in count");
    w.scalar(s.last_step);
    w.scalar<std::uint64_t>(s.high.size());
    for (const std::int64_t h : s.high) w.scalar(h);
    for (const std::int64_t k : s.streak) w.scalar(k);
    w.scalar<std::uint64_t>(s.switches.size());
    for (const PrecisionControllerState::Switch& x : s.switches) {
      w.scalar(x.step);
      w.scalar(x.gemm);
      w.scalar(x.statistic);
      w.scalar(x.to_fp8);
    }
  }
  w.scalar<std::uint64_t>(c.residuals.size());
  for (const std::vector<std::vector<float>>& worker : c.residuals) {
    w.scalar<std::uint64_t>(worker.size());
    for (const std::vector<float>& t : worker) {
      w.scalar<std::uint64_t>(t.size());
      w.floats(t);
    }
  }
  const std::string digest = hash_of(w.bytes(), w.bytes().size());
  for (std::size_t i = 0; i < kHashBytes; ++i) w.scalar(static_cast<std::uint8_t>(std::stoi(digest.substr(2 * i, 2), nullptr, 16)));

  std::error_code error;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), error);
  if (error) throw CheckpointError("checkpoint " + file.string() + ": cannot create its folder: " + error.message());
  const std::filesystem::path temporary = file.string() + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) write_failed(temporary, "cannot create");
  write_all(fd, w.bytes(), temporary);
  if (::fsync(fd) != 0) write_failed(temporary, "cannot fsync");
  ::close(fd);
  if (::rename(temporary.c_str(), file.c_str()) != 0) write_failed(file, "cannot rename the temporary over it");
  // The rename is durable once the folder's entry is.
  const std::filesystem::path folder = file.has_parent_path() ? file.parent_path() : ".";
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

RunCheckpoint read_checkpoint(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CheckpointError("checkpoint " + file.string() + ": field 'file': cannot open it");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto fail = [&](const std::string& field, const std::string& what) {
    throw CheckpointError("checkpoint " + file.string() + ": field '" + field + "': " + what);
  };
  if (bytes.size() < sizeof kMagic + sizeof kVersion + kHashBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail("magic", "not an fp8lab training checkpoint (or truncated)");
  const std::size_t body = bytes.size() - kHashBytes;
  if (hex(reinterpret_cast<const unsigned char*>(bytes.data() + body), kHashBytes) != hash_of(bytes, body))
    fail("sha256", "the contents do not match their hash (truncated or damaged)");

  Reader r(bytes, body, file);
  r.scalar<std::array<char, sizeof kMagic>>("magic");
  const auto version = r.scalar<std::uint32_t>("version");
  if (version != kVersion)
    fail("version", std::to_string(version) + " (this fp8lab reads version " + std::to_string(kVersion) + ")");
  RunCheckpoint c;
  c.identity = r.text("identity", body);
  c.build = r.text("build", 4096);
  c.next_step = r.scalar<std::int64_t>("next_step");
  c.updates = r.scalar<std::int64_t>("updates");
  if (c.next_step < 1 || c.updates < 0 || c.updates > c.next_step) fail("next_step", "steps and updates are inconsistent");
  try {
    c.scaler = LossScalerState::from_string(r.text("scaler", body));
  } catch (const std::invalid_argument& e) {
    fail("scaler", e.what());
  }
  const auto records = r.scalar<std::uint64_t>("records");
  if (records != static_cast<std::uint64_t>(c.next_step)) fail("records", "not one per step done");
  for (std::uint64_t i = 0; i < records; ++i) {
    std::array<double, kStepRecordFields> fields{};
    for (double& f : fields) f = r.scalar<double>("records");
    StepRecord& record = c.records.emplace_back(step_record_from_fields(fields));
    const auto tallies = r.scalar<std::uint64_t>("records.operand_stats");
    if (tallies > r.left()) fail("records.operand_stats", "the file ends early (truncated)");
    for (std::uint64_t t = 0; t < tallies; ++t) {
      GemmOperandTally& tally = record.operand_stats.emplace_back();
      tally.layer = r.text("records.operand_stats.layer", 256);
      const auto kind = r.scalar<std::uint8_t>("records.operand_stats.kind");
      if (kind > static_cast<std::uint8_t>(GemmKind::wgrad)) fail("records.operand_stats.kind", "not a GEMM kind");
      tally.kind = static_cast<GemmKind>(kind);
      for (OperandTally* o : {&tally.a, &tally.b}) {
        o->signal = r.scalar<double>("records.operand_stats");
        o->noise = r.scalar<double>("records.operand_stats");
        o->elements = r.scalar<std::int64_t>("records.operand_stats");
        o->saturated = r.scalar<std::int64_t>("records.operand_stats");
        o->flushed = r.scalar<std::int64_t>("records.operand_stats");
      }
    }
  }
  const auto tensors = r.scalar<std::uint64_t>("tensors");
  for (std::uint64_t i = 0; i < tensors; ++i) {
    TensorState t;
    t.name = r.text("tensors.name", 256);
    const auto count = r.scalar<std::uint64_t>("tensors.count");
    if (count > r.left() / (3 * sizeof(float))) fail("tensors." + t.name, "the file ends early (truncated)");
    t.weights = r.floats(count, "tensors.weights");
    t.m = r.floats(count, "tensors.m");
    t.v = r.floats(count, "tensors.v");
    c.tensors.push_back(std::move(t));
  }
  const auto delayed = r.scalar<std::uint64_t>("delayed");
  for (std::uint64_t i = 0; i < delayed; ++i) {
    DelayedOperandState d;
    d.key = r.text("delayed.key", 256);
    const auto format = r.scalar<std::uint8_t>("delayed.format");
    if (format > static_cast<std::uint8_t>(Fp8Format::e5m2)) fail("delayed.format", "not an FP8 format");
    d.config.format = static_cast<Fp8Format>(format);
    d.config.history_length = r.scalar<std::int64_t>("delayed.history_length");
    const auto reduction = r.scalar<std::uint8_t>("delayed.reduction");
    if (reduction > static_cast<std::uint8_t>(AmaxReduction::most_recent)) fail("delayed.reduction", "not a reduction");
    d.config.reduction = static_cast<AmaxReduction>(reduction);
    d.config.margin = r.scalar<std::int32_t>("delayed.margin");
    try {
      d.config.validate();
    } catch (const std::invalid_argument& e) {
      fail("delayed." + d.key, e.what());
    }
    d.history = r.floats(static_cast<std::uint64_t>(d.config.history_length), "delayed.history");
    d.scale = r.scalar<float>("delayed.scale");
    c.delayed.push_back(std::move(d));
  }
  const auto has_controller = r.scalar<std::uint8_t>("controller");
  if (has_controller > 1) fail("controller", "flag " + std::to_string(has_controller) + " is not 0 or 1");
  if (has_controller == 1) {
    PrecisionControllerState& s = c.controller.emplace();
    s.last_step = r.scalar<std::int64_t>("controller.last_step");
    const auto gemms = r.scalar<std::uint64_t>("controller.gemms");
    if (gemms > body / 16) fail("controller.gemms", std::to_string(gemms) + " is more than the file holds");
    for (std::uint64_t g = 0; g < gemms; ++g) s.high.push_back(r.scalar<std::int64_t>("controller.high"));
    for (std::uint64_t g = 0; g < gemms; ++g) s.streak.push_back(r.scalar<std::int64_t>("controller.streak"));
    const auto switches = r.scalar<std::uint64_t>("controller.switches");
    if (switches > body / 32) fail("controller.switches", std::to_string(switches) + " is more than the file holds");
    for (std::uint64_t i = 0; i < switches; ++i) {
      PrecisionControllerState::Switch& x = s.switches.emplace_back();
      x.step = r.scalar<std::int64_t>("controller.switches");
      x.gemm = r.scalar<std::int64_t>("controller.switches");
      x.statistic = r.scalar<double>("controller.switches");
      x.to_fp8 = r.scalar<std::int64_t>("controller.switches");
    }
  }
  const auto workers = r.scalar<std::uint64_t>("residuals");
  if (workers > body / 8) fail("residuals", std::to_string(workers) + " workers is more than the file holds");
  for (std::uint64_t w = 0; w < workers; ++w) {
    std::vector<std::vector<float>>& worker = c.residuals.emplace_back();
    const auto residual_tensors = r.scalar<std::uint64_t>("residuals.tensors");
    if (residual_tensors > body / 8)
      fail("residuals.tensors", std::to_string(residual_tensors) + " is more than the file holds");
    for (std::uint64_t t = 0; t < residual_tensors; ++t) {
      const auto count = r.scalar<std::uint64_t>("residuals.count");
      if (count > body / 4) fail("residuals.count", std::to_string(count) + " values is more than the file holds");
      worker.push_back(r.floats(count, "residuals"));
    }
  }
  if (!r.at_end()) fail("residuals", "bytes left over after the last entry");
  return c;
}

std::string this_build() {
  const std::map<std::string, std::string> p = build_provenance();
  return p.at("compiler") + "; " + p.at("compiler_flags") + "; -march=" + p.at("build_march");
}

std::string build_mismatch(const RunCheckpoint& c) {
  if (c.build == this_build()) return "";
  return "written by another build (" + c.build + "; this one: " + this_build() +
         "): the curve continues bit-identically only where both builds compute the same bits";
}

void require_identity(const std::filesystem::path& file, const RunCheckpoint& c, const std::string& identity) {
  if (c.identity == identity) return;
  std::istringstream theirs(c.identity), ours(identity);
  std::string a, b;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(theirs, a)), more_b = static_cast<bool>(std::getline(ours, b));
    if (!more_a) a = "(nothing)";
    if (!more_b) b = "(nothing)";
    if (a != b || (!more_a && !more_b)) break;
  }
  throw CheckpointError("checkpoint " + file.string() + ": field 'identity': written by another run (it has '" + a +
                        "' where this run has '" + b + "')");
}

}  // namespace fp8lab::train
