// Reading CSV text (RFC 4180), the one reader of every CSV fsdpsim takes in (validation cases,
// sweep tables): fields split at commas; a quoted field may hold commas, doubled quotes and line
// breaks; records end at LF, CRLF or a lone CR outside quotes; a UTF-8 byte-order mark at the
// start (as spreadsheets write it) is skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdpsim::app {

struct CsvRecord {
  std::int64_t line = 0;            // 1-based line of the text the record starts on
  std::vector<std::string> fields;  // empty for a blank line
  bool blank = false;
};

// Every record of `text`. Throws ConfigError naming `file` and the line on an unterminated quote
// or a quote inside an unquoted field.
std::vector<CsvRecord> parse_csv_records(const std::string& text, const std::string& file);

// The fields of one line (a CR at its end is the CRLF line end); nullopt when its quotes are
// malformed or it holds more than one record.
std::optional<std::vector<std::string>> parse_csv_line(const std::string& line);

}  // namespace fsdpsim::app
