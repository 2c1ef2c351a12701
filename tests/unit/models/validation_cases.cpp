#include "validation_cases.hpp"

#include <fstream>
#include <stdexcept>

namespace fsdpsim::models::testing {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace

std::vector<CsvRow> read_validation_cases() {
  const std::string path = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/cases.csv";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  std::vector<CsvRow> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> fields = split_csv_line(line);
    if (fields.size() != header.size())
      throw std::runtime_error("bad row in " + path + ": " + line);
    CsvRow row;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
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
