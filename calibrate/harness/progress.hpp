// The progress display: rank 0 only, on stderr. On a terminal the current measurement is
// rewritten in place and each finished series stays as a line; elsewhere (a Slurm log) only
// the finished lines are printed.
#pragma once

#include <string>

namespace fsdpsim::harness {

void progress_line(bool root, const std::string& text, bool finished);

}  // namespace fsdpsim::harness
