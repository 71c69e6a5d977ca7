#include "harness/runtime/output_files.hpp"

#include <unistd.h>

#include <stdexcept>
#include <string>

#include "data/tensor_io/file_bytes.hpp"
#include "harness/runtime/interrupt.hpp"

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
  // A link is written through (write_target): its target must be writable too, checked now.
  const std::filesystem::path target = write_target(file);
  if (target != file) require_writable_location(target);
}

bool same_output_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  // absolute() first: weakly_canonical leaves a relative path none of which exists as it is,
  // so x.npy and ./x.npy would differ while neither file exists yet.
  const auto key = [](const std::filesystem::path& p) {
    std::error_code error;
    const std::filesystem::path full = std::filesystem::absolute(write_target(p));
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(full, error);
    return error ? full.lexically_normal() : resolved;
  };
  return key(a) == key(b);
}

void require_distinct_outputs(const std::vector<std::filesystem::path>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (same_output_file(outputs[j], outputs[i]))
        throw std::invalid_argument(outputs[i].string() + ": named twice as an output (also as " +
                                    outputs[j].string() + ")");
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
  // One file under two spellings (a link and its target, x.npy and ./x.npy) is named twice:
  // both would share one temporary and the second rename would fail after the first.
  for (const Entry& e : entries_)
    if (same_output_file(e.final_name, file))
      throw std::invalid_argument(named.string() + ": named twice as an output");
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
