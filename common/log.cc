#include "common/log.h"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <sys/time.h>

namespace trainctl {

void WriteLogLine(LogLevel level, const char* file, int line,
                  const std::string& message) {
  static std::mutex mu;
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm local;
  localtime_r(&tv.tv_sec, &local);
  char when[32];
  strftime(when, sizeof(when), "%H:%M:%S", &local);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  const char tag = level == LogLevel::kInfo      ? 'I'
                   : level == LogLevel::kWarning ? 'W'
                                                 : 'E';
  std::lock_guard<std::mutex> lock(mu);
  fprintf(stderr, "%c %s.%03ld %s:%d] %s\n", tag, when,
          static_cast<long>(tv.tv_usec / 1000), base, line, message.c_str());
  fflush(stderr);
}

}  // namespace trainctl
