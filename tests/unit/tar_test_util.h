#pragma once

// Tar files built in the test (the webdataset reader and the data probe).
// Torch-free, no library needed.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace trainctl::testing {

// A ustar archive of (name, bytes) regular files, as `tar cf` writes one.
inline std::string Tar(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, bytes] : files) {
    std::string header(512, '\0');
    std::memcpy(header.data(), name.data(), std::min<size_t>(name.size(), 99));
    std::snprintf(header.data() + 100, 8, "%07o", 0644);
    std::snprintf(header.data() + 108, 8, "%07o", 0);
    std::snprintf(header.data() + 116, 8, "%07o", 0);
    std::snprintf(header.data() + 124, 12, "%011lo", static_cast<unsigned long>(bytes.size()));
    std::snprintf(header.data() + 136, 12, "%011o", 0);
    header[156] = '0';
    std::memcpy(header.data() + 257, "ustar\0" "00", 8);
    std::memset(header.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : header) sum += c;
    std::snprintf(header.data() + 148, 8, "%06o", sum);
    out += header;
    out += bytes;
    out.append((512 - bytes.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

}  // namespace trainctl::testing
