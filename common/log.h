#pragma once

#include <sstream>
#include <string>

namespace trainctl {

enum class LogLevel { kInfo, kWarning, kError };

// Writes one timestamped line to stderr; safe from any thread.
void WriteLogLine(LogLevel level, const char* file, int line,
                  const std::string& message);

// Collects a message with << and writes it when destroyed.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line)
      : level_(level), file_(file), line_(line) {}
  ~LogMessage() { WriteLogLine(level_, file_, line_, stream_.str()); }
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace trainctl

#define TLOG_INFO \
  ::trainctl::LogMessage(::trainctl::LogLevel::kInfo, __FILE__, __LINE__).stream()
#define TLOG_WARNING                                                       \
  ::trainctl::LogMessage(::trainctl::LogLevel::kWarning, __FILE__, __LINE__) \
      .stream()
#define TLOG_ERROR \
  ::trainctl::LogMessage(::trainctl::LogLevel::kError, __FILE__, __LINE__).stream()
