#include "client/live_terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace trainctl::client {

void LiveBlock::Erase() {
  if (!drawn_ || block_.empty()) return;
  // Column 1, up over the block, then clear everything below the cursor.
  out_ << "\r\x1b[" << block_.size() << "A\x1b[J";
}

void LiveBlock::Draw(const std::vector<std::string>& lines,
                     const std::vector<std::string>& above) {
  if (above.empty() && drawn_ && lines == block_) return;
  Erase();
  for (const std::string& line : above) out_ << line << "\n";
  for (const std::string& line : lines) out_ << line << "\n";
  block_ = lines;
  drawn_ = true;
  out_.flush();
}

void LiveBlock::PrintAbove(const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  Draw(std::vector<std::string>(block_), lines);
}

int TerminalWidth(int fd) {
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  int columns = 0;
  if (const char* env = std::getenv("COLUMNS");
      env != nullptr && absl::SimpleAtoi(env, &columns) && columns > 0) {
    return columns;
  }
  return 80;
}

bool IsLiveTerminal(int fd) {
  if (isatty(fd) == 0) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

}  // namespace trainctl::client
