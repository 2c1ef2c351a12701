// The scratch folder of one test process, shared by every test suite: made once by mkdtemp in
// the system's temporary folder, and removed with its contents when the process returns from
// main or calls exit, so that test runs leave nothing behind (ctest starts one process per test:
// a folder kept by each filled /tmp with tens of thousands). A process in which a test failed
// keeps it, and says where, for the files to be looked at; one killed by a signal or ended by
// _exit or abort (a ctest timeout) keeps it too. A child forked by a death test that exits never
// removes its parent's folder.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp (POSIX)
#include <unistd.h>  // getpid

#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace fsdpsim::test_support {

class ProcessScratchFolder {
 public:
  ProcessScratchFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fsdpsim_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("scratch_folder: mkdtemp(" + pattern + ") failed");
    }
    path_ = pattern;
  }
  ~ProcessScratchFolder() {
    if (::getpid() != owner_) return;  // a forked child's exit: the folder is its parent's
    // GoogleTest's UnitTest lives to the end of the process (it is never destroyed).
    if (::testing::UnitTest::GetInstance()->Failed()) {
      std::cerr << "scratch folder of the failed test kept: " << path_.string() << '\n';
      return;
    }
    std::error_code ignored;  // a destructor at exit has no one to report to
    std::filesystem::remove_all(path_, ignored);
  }
  ProcessScratchFolder(const ProcessScratchFolder&) = delete;
  ProcessScratchFolder& operator=(const ProcessScratchFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  pid_t owner_ = ::getpid();
};

// This test process's own scratch folder. A folder named after the PID alone was not: PIDs are
// reused, and a folder left by an earlier process (a symbolic link to /dev/full, an older report)
// failed a test that expected to start empty.
inline const std::filesystem::path& process_temp_root() {
  static const ProcessScratchFolder folder;
  return folder.path();
}

// A folder for one test suite (and optionally one test) inside the process's scratch folder.
inline std::filesystem::path temp_dir(const std::string& suite, const std::string& sub = "") {
  const std::filesystem::path dir = process_temp_root() / ("fsdpsim_" + suite + "_test") / sub;
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace fsdpsim::test_support
