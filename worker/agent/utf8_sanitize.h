#pragma once

// Text from rank processes goes into proto3 `string` fields, which must be
// valid UTF-8: a peer's parser rejects the whole message otherwise (and with
// it the agent's stream or registration). Torch-free and allocation-light.

#include <cstddef>
#include <string>
#include <string_view>

namespace trainctl::agent {

// `bytes` as valid UTF-8: every ill-formed sequence (stray continuation or
// invalid lead bytes, truncated sequences, overlong forms, surrogates, code
// points above U+10FFFF) becomes U+FFFD; the result is then cut to at most
// `max_bytes` on a code-point boundary.
std::string SanitizeUtf8(std::string_view bytes,
                         size_t max_bytes = std::string::npos);

// True when `bytes` is valid UTF-8 (the check protobuf applies when parsing).
bool IsValidUtf8(std::string_view bytes);

}  // namespace trainctl::agent
