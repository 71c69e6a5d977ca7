#include "kernels/memory_ledger.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

namespace fp8lab {

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::weights: return "weights";
    case MemoryCategory::saved_activations: return "saved_activations";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::workspace: return "workspace";
    case MemoryCategory::other: return "other";
    case MemoryCategory::recompute_workspace: return "recompute_workspace";
    case MemoryCategory::gemm_workspace: return "gemm_workspace";
    case MemoryCategory::optimizer_state: return "optimizer_state";
  }
  return "?";
}

void* HostAllocator::allocate(std::size_t bytes) {
  constexpr std::size_t kAlignment = 256;
  void* p = std::aligned_alloc(kAlignment, std::max<std::size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment));
  if (!p) throw std::bad_alloc();
  return p;
}

void HostAllocator::release(void* pointer) noexcept { std::free(pointer); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ledger_(std::exchange(other.ledger_, nullptr)), pointer_(std::exchange(other.pointer_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)), category_(other.category_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ledger_ = std::exchange(other.ledger_, nullptr);
    pointer_ = std::exchange(other.pointer_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    category_ = other.category_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (ledger_) ledger_->released(*this);
  ledger_ = nullptr;
  pointer_ = nullptr;
  bytes_ = 0;
}

DeviceBuffer MemoryLedger::allocate(std::size_t bytes, MemoryCategory category) {
  DeviceBuffer b;
  b.pointer_ = allocator_ ? allocator_->allocate(bytes) : nullptr;  // allocate first: a failure counts nothing
  b.ledger_ = this;
  b.bytes_ = bytes;
  b.category_ = category;
  std::lock_guard lock(mutex_);
  const auto c = static_cast<std::size_t>(category);
  live_[c] += bytes;
  peak_[c] = std::max(peak_[c], live_[c]);
  live_total_ += bytes;
  peak_total_ = std::max(peak_total_, live_total_);
  if (!phases_.empty()) {
    PhasePeaks& p = phases_.back();
    p.peak[c] = std::max(p.peak[c], live_[c]);
    p.peak_total = std::max(p.peak_total, live_total_);
  }
  return b;
}

void MemoryLedger::released(const DeviceBuffer& buffer) noexcept {
  if (allocator_ && buffer.pointer_) allocator_->release(buffer.pointer_);
  std::lock_guard lock(mutex_);
  live_[static_cast<std::size_t>(buffer.category_)] -= buffer.bytes_;
  live_total_ -= buffer.bytes_;
}

std::size_t MemoryLedger::live(MemoryCategory c) const {
  std::lock_guard lock(mutex_);
  return live_[static_cast<std::size_t>(c)];
}
std::size_t MemoryLedger::peak(MemoryCategory c) const {
  std::lock_guard lock(mutex_);
  return peak_[static_cast<std::size_t>(c)];
}
std::size_t MemoryLedger::live_total() const {
  std::lock_guard lock(mutex_);
  return live_total_;
}
std::size_t MemoryLedger::peak_total() const {
  std::lock_guard lock(mutex_);
  return peak_total_;
}

void MemoryLedger::begin_phase(std::string_view name) {
  std::lock_guard lock(mutex_);
  phases_.push_back({std::string(name), live_, live_total_});
}

void MemoryLedger::clear_phases() {
  std::lock_guard lock(mutex_);
  phases_.clear();
}

std::vector<PhasePeaks> MemoryLedger::phases() const {
  std::lock_guard lock(mutex_);
  return phases_;
}

std::string MemoryLedger::summary() const {
  std::lock_guard lock(mutex_);
  std::string s;
  for (std::size_t c = 0; c < kMemoryCategories; ++c)
    s += std::string(memory_category_name(static_cast<MemoryCategory>(c))) + ": live " + std::to_string(live_[c]) +
         " B, peak " + std::to_string(peak_[c]) + " B\n";
  s += "total: live " + std::to_string(live_total_) + " B, peak " + std::to_string(peak_total_) + " B\n";
  return s;
}

}  // namespace fp8lab
