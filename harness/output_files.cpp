#include "harness/output_files.hpp"

#include <unistd.h>

#include <stdexcept>
#include <string>

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
}

PendingOutputs::~PendingOutputs() {
  for (const Entry& e : entries_) {
    std::error_code ignored;
    std::filesystem::remove(e.temporary, ignored);
    unregister_temporary_file(e.temporary);
  }
}

std::filesystem::path PendingOutputs::add(const std::filesystem::path& file) {
  require_writable_location(file);
  for (const Entry& e : entries_)
    if (e.final_name == file) throw std::invalid_argument(file.string() + ": named twice as an output");
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
