#pragma once

// Text from rank processes goes into proto3 `string` fields, which must be
// valid UTF-8: a peer's parser rejects the whole message otherwise (and with
// it the agent's stream or registration). Torch-free and allocation-light.

#include <cstddef>
#include <string>
#include <string_view>

namespace trainctl {

// `bytes` as valid UTF-8: every ill-formed sequence (stray continuation or
// invalid lead bytes, truncated sequences, overlong forms, surrogates, code
// points above U+10FFFF) becomes U+FFFD; the result is then cut to at most
// `max_bytes` on a code-point boundary.
std::string SanitizeUtf8(std::string_view bytes,
                         size_t max_bytes = std::string::npos);

// True when `bytes` is valid UTF-8 (the check protobuf applies when parsing).
bool IsValidUtf8(std::string_view bytes);

// True when `text` holds a control character (C0 but tab, DEL, or a C1
// code point): one that a terminal or a log reader acts on (ESC sequences,
// a newline that forges a log line).
bool HasControlCharacters(std::string_view text);

// `text` (valid UTF-8) with each control character written as \xNN (C1 as
// \u00NN), so it prints as what it is.
std::string EscapeControlCharacters(std::string_view text);

}  // namespace trainctl
