// Rendering gnuplot scripts (fsdpsim report). gnuplot is found on PATH at run time; the
// package is gnuplot-nox on Debian (.ci/install-deps).
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace fsdpsim::app {

// The first executable named `gnuplot` in the PATH folders, if any.
std::optional<std::filesystem::path> find_gnuplot();

// As find_gnuplot, or throws ConfigError (exit code 2) saying how to install it.
std::filesystem::path require_gnuplot();

// How long one plot may take: gnuplot renders a sweep's SVG in well under a second; a script
// still running after this is stuck.
inline constexpr std::chrono::seconds kGnuplotTimeout{300};

// Thrown by render_gnuplot when `stop` was raised (Ctrl-C, SIGTERM) while gnuplot ran.
struct GnuplotStopped : std::runtime_error {
  GnuplotStopped() : std::runtime_error("stopped while gnuplot ran") {}
};

// Runs `gnuplot -e "outfile='<tmp>'" <script>` inside `folder` (scripts name their data files
// relative to it and write to the variable `outfile`, defaulting to `output`), then renames the
// temporary file to `folder/output`, so a reader never sees half a plot. gnuplot is killed, and
// GnuplotStopped thrown, as soon as `stop` is raised. Throws ConfigError (exit code 2) naming the
// script with gnuplot's messages if it fails, or if it runs past kGnuplotTimeout.
void render_gnuplot(const std::filesystem::path& gnuplot, const std::filesystem::path& folder,
                    const std::string& script, const std::string& output,
                    const std::atomic<bool>* stop = nullptr);

}  // namespace fsdpsim::app
