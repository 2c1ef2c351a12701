#include "sim/app/report_folder.hpp"

#include <fmt/format.h>
#include <stdlib.h>  // mkdtemp (POSIX)

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <system_error>

#include "sim/app/config_error.hpp"

namespace fsdpsim::app {

namespace fs = std::filesystem;

namespace {

// A name a report writes (report_plots.cpp): index.md, points.tsv, pareto.*, axis_*, best_*.tsv,
// heatmap_*, each a plain file name. A list edited by hand names nothing else.
bool is_report_file_name(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    return false;
  if (name == "index.md" || name == "points.tsv") return true;
  const auto starts = [&](std::string_view prefix) { return name.rfind(prefix, 0) == 0; };
  const auto ends = [&](std::string_view suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool plot_file = ends(".gp") || ends(".svg") || ends(".tsv");
  if (starts("pareto.") || starts("axis_") || starts("heatmap_")) return plot_file;
  return starts("best_") && ends(".tsv");
}

}  // namespace

ScratchFolder::ScratchFolder(const fs::path& parent) {
  std::string pattern = (parent / ".fsdpsim-report-scratch-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw ConfigError(fmt::format("--out {}: cannot create a scratch folder in it ({})",
                                  parent.string(), std::strerror(errno)));
  }
  path_ = pattern;
}

ScratchFolder::~ScratchFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string report_file_list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += name + '\n';
  return text;
}

std::vector<std::string> previous_report_files(const fs::path& dir) {
  std::ifstream in(dir / kReportFileList);
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (is_report_file_name(line)) names.push_back(line);
  }
  return names;
}

void remove_stale_report_files(const fs::path& dir, const std::vector<std::string>& previous,
                               const std::vector<std::string>& current,
                               const std::vector<fs::path>& inputs) {
  for (const std::string& name : previous) {
    if (std::find(current.begin(), current.end(), name) != current.end()) continue;
    const fs::path file = dir / name;
    std::error_code ec;
    const bool is_input = std::any_of(inputs.begin(), inputs.end(), [&](const fs::path& input) {
      std::error_code ignored;
      return fs::equivalent(file, input, ignored);
    });
    if (!is_input && fs::is_regular_file(fs::symlink_status(file, ec))) fs::remove(file, ec);
  }
}

}  // namespace fsdpsim::app
