#pragma once

// Draws a block of lines at the bottom of a terminal and redraws it in
// place with ANSI escapes (cursor up, clear to the end of the screen); no
// curses. Lines printed "above" scroll up like ordinary output while the
// block stays below them. Not thread-safe: one caller at a time.

#include <ostream>
#include <string>
#include <vector>

namespace trainctl::client {

class LiveBlock {
 public:
  explicit LiveBlock(std::ostream& out) : out_(out) {}

  // Prints `above` where the block was, then the block `lines` (each one
  // terminal row, already cut to the width) below them. Writes nothing when
  // both are what is on screen already.
  void Draw(const std::vector<std::string>& lines,
            const std::vector<std::string>& above = {});
  // Prints `lines` where the block was and the block again below them.
  void PrintAbove(const std::vector<std::string>& lines);
  // Leaves the last block on screen as ordinary output.
  void Finish() { out_.flush(); }

 private:
  void Erase();

  std::ostream& out_;
  std::vector<std::string> block_;
  bool drawn_ = false;
};

// Columns of the terminal on fd (TIOCGWINSZ), else $COLUMNS, else 80.
int TerminalWidth(int fd);
// fd is a terminal and $TERM is not "dumb".
bool IsLiveTerminal(int fd);

}  // namespace trainctl::client
