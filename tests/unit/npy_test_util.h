#pragma once

// .npy files built byte by byte, for the tests of the npy reader and the
// data probe that must not depend on NumPy. Torch-free.

#include <string>
#include <vector>

namespace trainctl::testing {

// A version 1.0 .npy file as np.save writes it: magic, the header's dict
// padded with spaces to a multiple of 64 bytes, then the elements.
inline std::string NpyWithHeader(std::string header,
                                 const std::string& elements) {
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + elements;
}

inline std::string Npy(const std::string& descr, const std::string& shape,
                       const std::string& elements, bool fortran = false) {
  return NpyWithHeader("{'descr': '" + descr + "', 'fortran_order': " +
                           (fortran ? "True" : "False") + ", 'shape': " +
                           shape + ", }",
                       elements);
}

template <typename T>
std::string Elements(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

}  // namespace trainctl::testing
