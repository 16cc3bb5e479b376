#pragma once

// Minimal JSON text helpers for the hand-written JSONL outputs of logs,
// metrics and plot (their shape is documented in docs/cli.md and is not a
// proto message).

#include <string>

namespace trainctl::client {

// A quoted, escaped JSON string.
std::string JsonString(const std::string& text);
// Shortest text that reads back as the same double ("0.1", "1e-05");
// "null" for NaN and infinities, which JSON cannot hold.
std::string JsonNumber(double value);
// Like JsonNumber, but NaN/inf as "nan", "inf", "-inf" (for CSV cells).
std::string ShortestDouble(double value);

}  // namespace trainctl::client
