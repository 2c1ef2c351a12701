// Where preset files live and how a scenario names them: a bare name ("gpt-175b") is looked up
// in <configs>/<kind>/<name>.json; anything with a '/' or ending in ".json" is a path relative to
// the file that names it.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/app/config_error.hpp"

namespace fsdpsim::app {

// Whether a reference names a file by its path (a '/' in it, or a name ending in ".json") rather
// than a preset by its name.
inline bool names_a_path(const std::string& reference) {
  return reference.find('/') != std::string::npos ||
         (reference.size() > 5 && reference.ends_with(".json"));
}

struct PresetLocator {
  std::filesystem::path configs_dir;  // holds models/, hardware/, ...
  // When set, every file resolve() returns is added to it (`fsdpsim sweep` fingerprints the preset
  // and calibration files a grid names). Not synchronized: set it on a locator one thread uses.
  std::set<std::filesystem::path>* files_resolved = nullptr;

  // The file a reference denotes. Throws ConfigError (naming `from_file` and `json_path`) if it
  // does not exist, listing the available presets of that kind.
  [[nodiscard]] std::filesystem::path resolve(const std::string& kind, const std::string& reference,
                                              const std::filesystem::path& from_file,
                                              const std::string& json_path) const;
  // Names of the presets of one kind, sorted.
  [[nodiscard]] std::vector<std::string> names(const std::string& kind) const;
  // For a file resolve() found in the presets folder by its name, what to add to an error of an
  // unknown or missing key in it: which folder this binary reads, since presets of another
  // version than the binary (another checkout, or a pull without a rebuild) hold keys it does
  // not know or lack keys it needs. Empty for a file named by its path.
  [[nodiscard]] std::string unknown_key_hint(const std::filesystem::path& preset_file) const;
};

// What a file of `kind` is called in messages: "calibration profile", else "<kind> preset"
// ("models preset", "hardware preset").
inline std::string preset_noun(const std::string& kind) {
  return kind == "calibration" ? std::string("calibration profile") : kind + " preset";
}

// Runs `parse` on the content of a preset named at `from_file`'s `json_path`. An error there names
// the preset file; it is rethrown naming the reference too, since a preset of another kind or a
// stale path is the referencing file's mistake: "... (the models preset named at s.json:
// /model/preset)"; an unknown or missing key, by `unknown_key_hint` (PresetLocator's).
template <class Parse>
decltype(auto) parse_preset(const std::string& kind, const std::filesystem::path& from_file,
                            const std::string& json_path, const std::string& unknown_key_hint,
                            Parse&& parse) {
  try {
    return std::forward<Parse>(parse)();
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    const bool key_mismatch = message.find(": unknown key") != std::string::npos ||
                              message.find(": required key is missing") != std::string::npos;
    throw ConfigError(message + " (the " + preset_noun(kind) + " named at " + from_file.string() +
                      (json_path.empty() ? "" : ": " + json_path) + ")" +
                      (key_mismatch ? unknown_key_hint : std::string()));
  }
}

// Whether `message`, a loader's error, says that a file or preset a value names cannot be used:
// not found, not a regular file, an unknown preset name (resolve's errors), or invalid on its own
// (parse_preset's). Such an error holds whatever the rest of the scenario is.
bool names_unusable_file(const std::string& message);

// --configs DIR, else $FSDPSIM_CONFIGS_DIR, else the configs/ folder of the source tree the
// binary was built from.
std::filesystem::path default_configs_dir(const std::string& from_command_line);

}  // namespace fsdpsim::app
