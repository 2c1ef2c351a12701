// Rendering gnuplot scripts (fsdpsim report). gnuplot is found on PATH at run time; the
// package is gnuplot-nox on Debian (.ci/install-deps).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace fsdpsim::app {

// The first executable named `gnuplot` in the PATH folders, if any.
std::optional<std::filesystem::path> find_gnuplot();

// As find_gnuplot, or throws ConfigError (exit code 2) saying how to install it.
std::filesystem::path require_gnuplot();

// Runs `gnuplot -e "outfile='<tmp>'" <script>` inside `folder` (scripts name their data files
// relative to it and write to the variable `outfile`, defaulting to `output`), then renames the
// temporary file to `folder/output`, so a reader never sees half a plot. Throws
// std::runtime_error with gnuplot's messages if it fails (a script we generated is our bug).
void render_gnuplot(const std::filesystem::path& gnuplot, const std::filesystem::path& folder,
                    const std::string& script, const std::string& output);

}  // namespace fsdpsim::app
