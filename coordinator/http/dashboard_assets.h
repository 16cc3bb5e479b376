#pragma once

// The dashboard's files (coordinator/http/dashboard/), compiled into the
// binary by embed_assets.cmake so an installed coordinator needs no data
// directory.

#include <cstddef>
#include <string_view>

namespace trainctl::coordinator::http {

struct EmbeddedAsset {
  const char* name;  // file name, e.g. "app.js"
  const unsigned char* data;
  size_t size;
};

// The file named `name`, or nullptr.
const EmbeddedAsset* FindDashboardAsset(std::string_view name);

}  // namespace trainctl::coordinator::http
