#include "common/utf8_sanitize.h"

#include <cstdint>

namespace trainctl {
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

namespace {

// The control character at text[i] and its length, or 0.
size_t ControlAt(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if ((c < 0x20 && c != '\t') || c == 0x7f) return 1;
  if (c == 0xc2 && i + 1 < text.size()) {
    const auto next = static_cast<unsigned char>(text[i + 1]);
    if (next >= 0x80 && next <= 0x9f) return 2;  // U+0080..U+009F
  }
  return 0;
}

}  // namespace

bool HasControlCharacters(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (ControlAt(text, i) > 0) return true;
  }
  return false;
}

std::string EscapeControlCharacters(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t control = ControlAt(text, i);
    if (control == 0) {
      out += text[i++];
      continue;
    }
    const auto code = static_cast<unsigned char>(text[i + control - 1]);
    out += control == 1 ? "\\x" : "\\u00";
    out += kHex[code >> 4];
    out += kHex[code & 0xf];
    i += control;
  }
  return out;
}

}  // namespace trainctl
