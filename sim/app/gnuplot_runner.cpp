#include "sim/app/gnuplot_runner.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "sim/app/config_error.hpp"

namespace fsdpsim::app {

namespace fs = std::filesystem;

std::optional<fs::path> find_gnuplot() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  const std::string folders = path;
  std::size_t begin = 0;
  while (begin <= folders.size()) {
    const std::size_t end = std::min(folders.find(':', begin), folders.size());
    const std::string folder = folders.substr(begin, end - begin);
    if (!folder.empty()) {
      const fs::path candidate = fs::path(folder) / "gnuplot";
      std::error_code ec;
      // Absolute: the plots are rendered from inside the output folder, where a relative
      // PATH entry would name another file.
      if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
        return fs::absolute(candidate, ec);
    }
    begin = end + 1;
  }
  return std::nullopt;
}

fs::path require_gnuplot() {
  if (std::optional<fs::path> gnuplot = find_gnuplot()) return *gnuplot;
  throw ConfigError(
      "gnuplot not found on PATH: fsdpsim report renders its plots with gnuplot; install it "
      "(Debian/Ubuntu: "
      "apt-get install gnuplot-nox, as .ci/install-deps does) or add its folder to PATH");
}

void render_gnuplot(const fs::path& gnuplot, const fs::path& folder, const std::string& script,
                    const std::string& output, const std::atomic<bool>* stop) {
  const std::string temporary = fmt::format(".{}.{}.tmp", output, ::getpid());
  const std::string assignment = fmt::format("outfile='{}'", temporary);
  std::array<int, 2> pipe_fds{};
  if (::pipe(pipe_fds.data()) != 0) throw std::runtime_error("cannot create a pipe for gnuplot");
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw std::runtime_error("cannot start gnuplot (fork failed)");
  }
  if (child == 0) {
    // In the child: only async-signal-safe calls until exec.
    ::close(pipe_fds[0]);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[1]);
    if (::chdir(folder.c_str()) != 0) ::_exit(126);
    std::array<const char*, 5> argv = {gnuplot.c_str(), "-e", assignment.c_str(), script.c_str(),
                                       nullptr};
    ::execv(gnuplot.c_str(), const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  // gnuplot's messages until it closes its end, polled so that a stop request or the deadline
  // ends the wait (a gnuplot stuck on a script, or one that left a process holding the pipe).
  std::string messages;
  std::array<char, 4096> buffer{};
  const auto deadline = std::chrono::steady_clock::now() + kGnuplotTimeout;
  enum class Ended { kExited, kStopped, kTimedOut } ended = Ended::kExited;
  while (true) {
    if (stop != nullptr && stop->load()) {
      ended = Ended::kStopped;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ended = Ended::kTimedOut;
      break;
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    constexpr int kPollMs = 100;
    const int ready = ::poll(&fd, 1, kPollMs);
    if (ready <= 0) continue;  // a tick, or a signal (EINTR): look at the flag and the clock
    const ssize_t n = ::read(pipe_fds[0], buffer.data(), buffer.size());
    if (n > 0) {
      messages.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);
  if (ended != Ended::kExited) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::error_code ec;
  if (ended != Ended::kExited || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fs::remove(folder / temporary, ec);
  if (ended == Ended::kStopped) throw GnuplotStopped();
  if (ended == Ended::kTimedOut) {
    throw ConfigError(
        fmt::format("gnuplot did not finish {} within {} s and was stopped", script,
                    std::chrono::duration_cast<std::chrono::seconds>(kGnuplotTimeout).count()));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw ConfigError(fmt::format("gnuplot failed on {} (exit status {}): {}", script,
                                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, messages));
  }
  // A gnuplot that ends well yet writes nothing (a stand-in script, a build without the svg
  // terminal that only warns) is named as such, not as a move that failed.
  if (!fs::is_regular_file(folder / temporary, ec)) {
    throw ConfigError(fmt::format(
        "gnuplot ran {} without an error but wrote no {}: is the gnuplot on PATH a gnuplot with "
        "the svg terminal (`gnuplot -e \"set terminal svg\"`)?",
        script, output));
  }
  fs::rename(folder / temporary, folder / output, ec);
  if (ec) {
    fs::remove(folder / temporary, ec);
    throw ConfigError(
        fmt::format("cannot move the plot into place at {}", (folder / output).string()));
  }
}

}  // namespace fsdpsim::app
