#pragma once
// RAII ownership of HDF5 C API identifiers, and one check for every call that can fail.
#include <hdf5.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace fp8lab::h5 {

class H5Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws H5Error naming the call when an HDF5 function returns a negative value.
inline hid_t check(hid_t id, const char* what) {
  if (id < 0) throw H5Error(std::string("HDF5: ") + what + " failed");
  return id;
}

template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(hid_t id, const char* what) : id_(check(id, what)) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, -1);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
};

using File = Handle<H5Fclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;
using PropertyList = Handle<H5Pclose>;

}  // namespace fp8lab::h5
