#include "harness/output_files.hpp"

#include <unistd.h>

#include <stdexcept>
#include <string>

#include "data/tensor_io/file_bytes.hpp"
#include "harness/interrupt.hpp"

namespace fp8lab {

void require_writable_location(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::is_directory(file, error))
    throw std::invalid_argument(file.string() + ": is a directory; give a file name to write");
  const std::filesystem::path parent = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  const std::filesystem::file_status status = std::filesystem::status(parent, error);
  if (!std::filesystem::exists(status))
    throw std::invalid_argument(file.string() + ": cannot write: directory " + parent.string() + " does not exist");
  if (!std::filesystem::is_directory(status))
    throw std::invalid_argument(file.string() + ": cannot write: " + parent.string() + " is not a directory");
  const std::filesystem::file_status existing = std::filesystem::status(file, error);
  if (std::filesystem::exists(existing) && !std::filesystem::is_regular_file(existing))
    throw std::invalid_argument(file.string() +
                                ": is not a regular file (a device, FIFO or socket); give a file name to write");
}

void require_not_input(const std::filesystem::path& output, const std::filesystem::path& input) {
  std::error_code error;  // a missing output is no input: equivalent() then says false
  if (std::filesystem::equivalent(output, input, error))
    throw std::invalid_argument(output.string() + ": is the input " + input.string() +
                                "; give another name (fp8lab does not write over its input)");
}

PendingOutputs::~PendingOutputs() {
  for (const Entry& e : entries_) {
    std::error_code ignored;
    std::filesystem::remove(e.temporary, ignored);
    unregister_temporary_file(e.temporary);
  }
}

std::filesystem::path PendingOutputs::add(const std::filesystem::path& named) {
  require_writable_location(named);
  const std::filesystem::path file = write_target(named);  // a link is written through
  if (file != named) require_writable_location(file);
  // One file under two spellings (a link and its target, x.npy and ./x.npy) is named twice:
  // both would share one temporary and the second rename would fail after the first.
  const auto same_file = [](const std::filesystem::path& a, const std::filesystem::path& b) {
    std::error_code error_a, error_b;
    const std::filesystem::path ca = std::filesystem::weakly_canonical(a, error_a);
    const std::filesystem::path cb = std::filesystem::weakly_canonical(b, error_b);
    return error_a || error_b ? a == b : ca == cb;
  };
  for (const Entry& e : entries_)
    if (same_file(e.final_name, file)) throw std::invalid_argument(named.string() + ": named twice as an output");
  const std::filesystem::path temporary = file.string() + ".tmp-" + std::to_string(::getpid());
  register_temporary_file(temporary);
  entries_.push_back({file, temporary});
  return temporary;
}

void PendingOutputs::commit() {
  for (const Entry& e : entries_) {
    std::error_code error;
    std::filesystem::rename(e.temporary, e.final_name, error);
    if (error) throw std::invalid_argument(e.final_name.string() + ": cannot write: " + error.message());
    unregister_temporary_file(e.temporary);
  }
  entries_.clear();
}

}  // namespace fp8lab
