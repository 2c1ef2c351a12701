#include "calibrate/harness/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace fsdpsim::harness {

void progress_line(bool root, const std::string& text, bool finished) {
  if (!root) return;
  static const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (tty) {
    std::fprintf(stderr, "\r\033[K%s%s", text.c_str(), finished ? "\n" : "");
  } else if (finished) {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

}  // namespace fsdpsim::harness
