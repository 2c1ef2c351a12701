// Published (or a user's own) measured training runs, one CSV row each, in the columns of
// configs/validation/README.md, turned into scenarios fsdpsim can simulate.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fsdpsim::app {

struct ValidationCase {
  std::int64_t line = 0;                      // 1-based line in the CSV
  std::map<std::string, std::string> fields;  // by column name; empty = not given

  [[nodiscard]] const std::string& get(const std::string& column) const;
  [[nodiscard]] std::optional<double> number(
      const std::string& column) const;  // nullopt when empty
  // A yes/no cell that says yes: true, TRUE or True, as spreadsheets write it (read_validation
  // cases has refused any other value but false, FALSE, False and empty).
  [[nodiscard]] bool yes(const std::string& column) const;
};

// Reads the CSV. Throws ConfigError naming the file and line on a malformed row, a missing
// required column, or a value of the wrong type (naming the column).
std::vector<ValidationCase> read_validation_cases(const std::filesystem::path& file);

// The columns of the cases' CSV that fsdpsim does not read (a cluster name, a run URL, a setting
// it has no column for): kept for --where and --group-by, in name order.
std::vector<std::string> columns_of_your_own(const std::vector<ValidationCase>& cases);

// The scenario document of a case, or the reason it cannot be modelled yet. Throws ConfigError
// (file, line, column) when a cell is malformed.
struct CaseScenario {
  nlohmann::json document;  // null when skipped
  std::string skip_reason;
  nlohmann::json model;  // the document's model section, skipped or not: checkable on its own
};
CaseScenario scenario_for_case(const ValidationCase& c, const std::filesystem::path& file);

// A loader message about a row's scenario ("<file>: /fsdp/version: expected 1 or 2, found 3")
// in the CSV's terms: "column fsdp_version: expected ..." where scenario_for_case filled that
// JSON path from one column; else the JSON path without the file, which the line already names.
std::string message_in_columns(const std::string& loader_message,
                               const std::filesystem::path& file);

}  // namespace fsdpsim::app
