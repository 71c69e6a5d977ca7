#pragma once
// The device-memory ledger (DESIGN.md section 3): every device buffer is allocated through
// it, and it records live and peak bytes per category. Backends give it an allocator: host
// memory on the CPU backend (exact accounting), cudaMalloc on a GPU (cross-checked with
// cudaMemGetInfo there), or none at all: shapes-only mode, which gives the same numbers for
// DeepSeek-V3-size layers without allocating anything.
#include <array>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace fp8lab {

// workspace: transient tensors (activation gradients, outputs not kept); the last three
// were added for the training step (kernels/train): tensors recomputed in backward, GEMM
// operand copies (quantized or transposed), optimizer state.
enum class MemoryCategory {
  weights, saved_activations, gradients, workspace, other, recompute_workspace, gemm_workspace, optimizer_state
};
inline constexpr std::size_t kMemoryCategories = 8;
const char* memory_category_name(MemoryCategory c);

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;  // throws std::bad_alloc (or a backend error)
  virtual void release(void* pointer) noexcept = 0;
  virtual const char* name() const = 0;
};

// 256-byte aligned host memory (cudaMalloc's alignment), for the CPU backend.
class HostAllocator final : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes) override;
  void release(void* pointer) noexcept override;
  const char* name() const override { return "host"; }
};

class MemoryLedger;

// Live-at-start and peak bytes of one named phase of a run (e.g. "forward/L3").
struct PhasePeaks {
  std::string name;
  std::array<std::size_t, kMemoryCategories> peak{};
  std::size_t peak_total = 0;
  std::size_t peak_of(MemoryCategory c) const { return peak[static_cast<std::size_t>(c)]; }
};

// Owns one allocation; returns it to the ledger when destroyed. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* data() const { return pointer_; }  // nullptr in shapes-only mode
  std::size_t bytes() const { return bytes_; }
  MemoryCategory category() const { return category_; }

 private:
  friend class MemoryLedger;

// Live-at-start and peak bytes of one named phase of a run (e.g. "forward/L3").
struct PhasePeaks {
  std::string name;
  std::array<std::size_t, kMemoryCategories> peak{};
  std::size_t peak_total = 0;
  std::size_t peak_of(MemoryCategory c) const { return peak[static_cast<std::size_t>(c)]; }
};
  void release() noexcept;
  MemoryLedger* ledger_ = nullptr;
  void* pointer_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::other;
};

class MemoryLedger {
 public:
  explicit MemoryLedger(DeviceAllocator* allocator) : allocator_(allocator) {}  // nullptr: shapes only
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  DeviceBuffer allocate(std::size_t bytes, MemoryCategory category);
  bool shapes_only() const { return allocator_ == nullptr; }

  std::size_t live(MemoryCategory c) const;
  std::size_t peak(MemoryCategory c) const;  // the most bytes of this category live at once
  std::size_t live_total() const;
  std::size_t peak_total() const;            // the most bytes live at once, all categories together
  std::string summary() const;               // one line per category

  // Phases: from begin_phase until the next one, peaks are also recorded for that phase,
  // starting from the bytes live when it begins. Phases never nest; none is open at first.
  void begin_phase(std::string_view name);
  std::vector<PhasePeaks> phases() const;
  // Forgets the phases recorded so far (the peaks stay): a caller that runs many steps on one
  // ledger (a training run) would otherwise keep every step's phases, and each step's report
  // would copy them all.
  void clear_phases();

 private:
  friend class DeviceBuffer;
  void released(const DeviceBuffer& buffer) noexcept;
  DeviceAllocator* allocator_;
  mutable std::mutex mutex_;
  std::array<std::size_t, kMemoryCategories> live_{}, peak_{};
  std::size_t live_total_ = 0, peak_total_ = 0;
  std::vector<PhasePeaks> phases_;
};

}  // namespace fp8lab
