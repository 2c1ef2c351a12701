#include "sim/app/preset_paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "sim/app/config_error.hpp"
#include "sim/app/json_reader.hpp"

namespace fsdpsim::app {

namespace fs = std::filesystem;

fs::path PresetLocator::resolve(const std::string& kind, const std::string& reference,
                                const fs::path& from_file, const std::string& json_path) const {
  if (names_a_path(reference)) {
    const fs::path p = fs::path(reference).is_absolute() ? fs::path(reference)
                                                         : from_file.parent_path() / reference;
    std::error_code ec;  // a name the file system refuses (too long) is a file that is not there
    const fs::file_status status = fs::status(p, ec);
    if (!fs::exists(status)) {
      // A relative path is the referring file's folder's: one meant from the working directory
      // fails here, and the message says where it looked.
      const bool relative_to_file =
          !fs::path(reference).is_absolute() && !from_file.parent_path().empty();
      // A link that loops (or a folder on the way that cannot be read) is not a missing file.
      const std::string state = ec && ec != std::errc::no_such_file_or_directory
                                    ? fmt::format("cannot be read ({})", ec.message())
                                    : "not found";
      // "llama-3.1-8b.json" for the preset llama-3.1-8b: a name with ".json" is read as a path.
      std::string preset_hint;
      std::error_code no_preset;
      if (const fs::path name = fs::path(reference).stem();
          reference == name.string() + ".json" &&
          fs::is_regular_file(configs_dir / kind / reference, no_preset)) {
        preset_hint = fmt::format("; for the {} {} write \"{}\"", preset_noun(kind), name.string(),
                                  name.string());
      }
      throw ConfigError(
          from_file.string(), json_path,
          fmt::format(
              "{} file \"{}\" {}{}{}", kind, p.string(), state,
              relative_to_file && state == "not found"
                  ? fmt::format(" (a relative path is read from the folder of {}, {}; "
                                "give an absolute path for another)",
                                from_file.filename().string(), from_file.parent_path().string())
                  : "",
              preset_hint));
    }
    if (!fs::is_regular_file(status)) {
      throw ConfigError(from_file.string(), json_path,
                        fmt::format("{} file \"{}\": expected a JSON file, found a folder, device "
                                    "or other special file",
                                    kind, p.string()));
    }
    if (files_resolved != nullptr) files_resolved->insert(p);
    return p;
  }
  const fs::path p = configs_dir / kind / (reference + ".json");
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) {
    if (files_resolved != nullptr) files_resolved->insert(p);
    return p;
  }
  if (!fs::is_directory(configs_dir / kind, ec)) {
    throw ConfigError(from_file.string(), json_path,
                      fmt::format("{} \"{}\": the presets folder {} does not exist (it "
                                  "comes from --configs, else $FSDPSIM_CONFIGS_DIR, else the "
                                  "source tree's configs/)",
                                  preset_noun(kind), reference, (configs_dir / kind).string()));
  }
  const std::vector<std::string> available = names(kind);
  const std::string hint = did_you_mean(reference, available);
  // A plain name is a preset's; a file of that name next to the referrer is named with a path.
  const fs::path as_file = from_file.parent_path() / reference;
  const bool file_there = fs::is_regular_file(as_file, ec);
  throw ConfigError(
      from_file.string(), json_path,
      fmt::format("unknown {} \"{}\"{}; available in {}: {}{}", preset_noun(kind), reference,
                  hint.empty() ? "" : fmt::format(" (did you mean {}?)", hint),
                  (configs_dir / kind).string(), fmt::join(available, ", "),
                  file_there
                      ? fmt::format(" (for the file {}, write ./{})", as_file.string(), reference)
                      : ""));
}

bool names_unusable_file(const std::string& message) {
  const auto has = [&message](std::string_view text) {
    return message.find(text) != std::string::npos;
  };
  // The messages of resolve above and of parse_preset (preset_paths.hpp).
  return (has(" file \"") && (has("\" not found") || has("\" cannot be read (") ||
                              has("expected a JSON file, found"))) ||
         (has("unknown ") && (has(" preset \"") || has("calibration profile \""))) ||
         has(": the presets folder ") ||
         (has("(the ") && (has(" preset named at ") || has("calibration profile named at ")));
}

std::string PresetLocator::unknown_key_hint(const fs::path& preset_file) const {
  // (configs_dir / "x").parent_path(): the folder itself, with or without a trailing '/'.
  if (preset_file.parent_path().parent_path() != (configs_dir / "x").parent_path()) return "";
  return fmt::format(
      "; this fsdpsim reads its presets from {} (--configs, else $FSDPSIM_CONFIGS_DIR, else the "
      "source tree it was built from), and presets of another version than the binary have "
      "keys it does not know or lack keys it needs: rebuild it, or pass --configs with the "
      "presets of its own version",
      configs_dir.string());
}

std::vector<std::string> PresetLocator::names(const std::string& kind) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(configs_dir / kind, ec)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

fs::path default_configs_dir(const std::string& from_command_line) {
  if (!from_command_line.empty()) return from_command_line;
  if (const char* env = std::getenv("FSDPSIM_CONFIGS_DIR"); env != nullptr && *env != '\0')
    return env;
  return FSDPSIM_DEFAULT_CONFIGS_DIR;
}

}  // namespace fsdpsim::app
