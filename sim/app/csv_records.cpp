#include "sim/app/csv_records.hpp"

#include <fmt/format.h>

#include "sim/app/config_error.hpp"

namespace fsdpsim::app {
namespace {

// Where a quote breaks RFC 4180, and how.
struct MalformedQuote {
  std::int64_t line = 0;
  std::size_t column = 0;  // 1-based
  std::string what;
};

// Splits `text` into `records`; returns the first malformed quote, if any.
std::optional<MalformedQuote> split_records(const std::string& text,
                                            std::vector<CsvRecord>& records) {
  std::size_t i = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  std::int64_t line = 1;
  // Consumes a line end at i, if any; returns whether one was there.
  const auto line_end = [&]() {
    if (i < text.size() && text[i] == '\r') {
      ++i;
      if (i < text.size() && text[i] == '\n') ++i;
      ++line;
      return true;
    }
    if (i < text.size() && text[i] == '\n') {
      ++i;
      ++line;
      return true;
    }
    return false;
  };
  const auto ends_field = [&](std::size_t at) {
    return at >= text.size() || text[at] == ',' || text[at] == '\n' || text[at] == '\r';
  };
  while (i < text.size()) {
    CsvRecord record;
    record.line = line;
    if (line_end()) {
      record.blank = true;
      records.push_back(std::move(record));
      continue;
    }
    while (true) {
      std::string field;
      if (i < text.size() && text[i] == '"') {
        const std::int64_t opened = line;
        ++i;
        while (true) {
          if (i >= text.size())
            return MalformedQuote{opened, record.fields.size() + 1, "a quote that is never closed"};
          const char c = text[i];
          if (c == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (c == '\n' || (c == '\r' && (i + 1 >= text.size() || text[i + 1] != '\n'))) ++line;
          field += c;
          ++i;
        }
        if (!ends_field(i) && opened != line) {
          // Most likely a quote left open on `opened` that a quote lines below seemed to close.
          return MalformedQuote{
              opened, record.fields.size() + 1,
              fmt::format("a quoted cell runs on to line {}, where text follows the quote that "
                          "would close it: is a quote on line {} left open?",
                          line, opened)};
        }
        if (!ends_field(i)) {
          return MalformedQuote{line, record.fields.size() + 1,
                                "text after the closing quote (a quote inside a quoted cell is "
                                "written twice: \"\")"};
        }
      } else {
        while (!ends_field(i)) {
          if (text[i] == '"') {
            return MalformedQuote{line, record.fields.size() + 1,
                                  "a quote inside a cell that does not start with one (quote the "
                                  "whole cell and write the quote twice: \"\")"};
          }
          field += text[i++];
        }
      }
      record.fields.push_back(std::move(field));
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      line_end();
      break;
    }
    records.push_back(std::move(record));
  }
  return std::nullopt;
}

}  // namespace

std::vector<CsvRecord> parse_csv_records(const std::string& text, const std::string& file) {
  std::vector<CsvRecord> records;
  if (const auto bad = split_records(text, records)) {
    throw ConfigError(fmt::format("{}: line {}, column {}: malformed CSV: {}", file, bad->line,
                                  bad->column, bad->what));
  }
  return records;
}

std::optional<std::vector<std::string>> parse_csv_line(const std::string& line) {
  std::vector<CsvRecord> records;
  if (split_records(line, records).has_value() || records.size() > 1) return std::nullopt;
  if (records.empty() || records.front().blank) return std::vector<std::string>{""};
  return std::move(records.front().fields);
}

}  // namespace fsdpsim::app
