#include "validation_cases.hpp"

#include "sim/app/validation_cases.hpp"

namespace fsdpsim::models::testing {

std::vector<CsvRow> read_validation_cases() {
  // The app's reader of the validation CSV (sim/app/validation_cases.cpp), so the tests read
  // the file exactly as `fsdpsim validate` does.
  std::vector<CsvRow> rows;
  for (app::ValidationCase& c :
       app::read_validation_cases(std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv")) {
    rows.push_back(std::move(c.fields));
  }
  return rows;
}

long long num_params_from_notes(const CsvRow& row) {
  const std::string& notes = row.at("notes");
  const std::string key = "NumParams=";
  const std::size_t at = notes.find(key);
  if (at == std::string::npos) return -1;
  return std::stoll(notes.substr(at + key.size()));
}

}  // namespace fsdpsim::models::testing
