#include "nccl_reference.hpp"

#include "sim/app/csv_records.hpp"

#include <charconv>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fsdpsim::hardware::testing {
namespace {

// The whole cell as one number, else nullopt.
template <typename T>
std::optional<T> parse_number(const std::string& cell) {
  T value{};
  const char* end = cell.data() + cell.size();
  const auto [ptr, ec] = std::from_chars(cell.data(), end, value);
  if (ec != std::errc() || ptr != end || cell.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::vector<NcclReferenceRow> read_nccl_reference() {
  const std::string path = std::string(FSDPSIM_CONFIGS_DIR) + "/validation/nccl_reference.csv";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string line;
  std::getline(in, line);  // header
  const auto header = app::parse_csv_line(line);
  if (!header || header->size() != 11) throw std::runtime_error(path + ": unexpected header");
  std::vector<NcclReferenceRow> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto parsed = app::parse_csv_line(line);
    if (!parsed) throw std::runtime_error(path + ": malformed row: " + line);
    const std::vector<std::string>& f = *parsed;
    if (f.size() != 11) throw std::runtime_error(path + ": a row without 11 fields: " + line);
    rows.push_back(NcclReferenceRow{f[0], f[1], f[2], parse_number<std::int32_t>(f[3]),
                                    parse_number<std::int32_t>(f[4]), f[5], f[6],
                                    parse_number<std::int64_t>(f[7]), parse_number<double>(f[8]),
                                    parse_number<double>(f[9]), f[10]});
  }
  return rows;
}

}  // namespace fsdpsim::hardware::testing
