// How `fsdpsim report` replaces a report in its folder: the plots are made in a private scratch
// folder inside DIR and published together only when every one rendered, and the files an older
// report wrote that the new one does not (an axis the new sweep lacks) are removed, by the list
// the older report left in DIR/.fsdpsim-report-files. Files it did not write are never touched.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace fsdpsim::app {

// The list of the files a report wrote, kept in its folder.
inline constexpr const char* kReportFileList = ".fsdpsim-report-files";

// A folder of its own, created inside `parent` (mkdtemp), removed with its contents when this
// goes out of scope, whether the report succeeded or failed. Throws ConfigError naming `parent`
// when it cannot be created.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::filesystem::path& parent);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The text of DIR/.fsdpsim-report-files for these file names, one per line.
std::string report_file_list(const std::vector<std::string>& names);

// The names listed in `dir`'s report file list, if it has one, keeping only those a report can
// have written (index.md, points.tsv, pareto.*, axis_*, best_*.tsv, heatmap_*, in `dir` itself):
// a list edited by hand cannot point the removal at another file or outside the folder.
std::vector<std::string> previous_report_files(const std::filesystem::path& dir);

// Removes from `dir` each of `previous` that is not in `current` and is not one of `inputs`
// (a sweep CSV kept in the report folder under a report's name). A file that cannot be removed
// is left; the report is complete without its removal.
void remove_stale_report_files(const std::filesystem::path& dir,
                               const std::vector<std::string>& previous,
                               const std::vector<std::string>& current,
                               const std::vector<std::filesystem::path>& inputs);

}  // namespace fsdpsim::app
