// Test helper: reads configs/validation/cases.csv (RFC 4180 quoting) into rows of named fields.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace fsdpsim::models::testing {

using CsvRow = std::map<std::string, std::string>;

// Rows of FSDPSIM_CONFIGS_DIR/validation/cases.csv keyed by header name; throws on I/O errors.
std::vector<CsvRow> read_validation_cases();

// The integer after "NumParams=" in a row's notes, or -1 when the notes print none.
long long num_params_from_notes(const CsvRow& row);

}  // namespace fsdpsim::models::testing
