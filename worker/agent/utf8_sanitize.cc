#include "worker/agent/utf8_sanitize.h"

#include <cstdint>

namespace trainctl::agent {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence at the start of `s`, or 0 when it is
// ill-formed (Unicode 15, table 3-7: well-formed UTF-8 byte sequences).
size_t WellFormedLength(std::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong below U+0800
    if (lead == 0xED) second_max = 0x9F;  // surrogates U+D800..U+DFFF
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong below U+10000
    if (lead == 0xF4) second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (s.size() < length) return 0;
  if (byte(1) < second_min || byte(1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes, size_t max_bytes) {
  std::string out;
  out.reserve(bytes.size() < max_bytes ? bytes.size() : max_bytes);
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t length = WellFormedLength(bytes.substr(i));
    const std::string_view piece =
        length > 0 ? bytes.substr(i, length) : kReplacement;
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece);
    // One ill-formed byte at a time: the next one may start a valid sequence.
    i += length > 0 ? length : 1;
  }
  return out;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t length = WellFormedLength(bytes.substr(i));
    if (length == 0) return false;
    i += length;
  }
  return true;
}

}  // namespace trainctl::agent
