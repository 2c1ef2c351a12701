#include "sim/app/junit_xml.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fsdpsim::app {
namespace {

struct Counts {
  std::size_t tests = 0;
  std::size_t failures = 0;
  std::size_t errors = 0;
  std::size_t skipped = 0;
};

std::size_t count_outcome(const std::vector<JunitCase>& cases, JunitOutcome outcome) {
  return static_cast<std::size_t>(std::count_if(
      cases.begin(), cases.end(), [&](const JunitCase& k) { return k.outcome == outcome; }));
}

Counts count(const std::vector<JunitCase>& cases) {
  Counts c;
  c.tests = cases.size();
  c.failures = count_outcome(cases, JunitOutcome::kFailed);
  c.errors = count_outcome(cases, JunitOutcome::kError);
  c.skipped = count_outcome(cases, JunitOutcome::kSkipped);
  return c;
}

}  // namespace

namespace {

// The length of the well-formed UTF-8 sequence at the start of `text` (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0 if it is not one.
std::size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t n = 0;
  unsigned char low = 0x80;  // the second byte's range
  unsigned char high = 0xbf;
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < n || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  // U+FFFE and U+FFFF are not XML characters.
  if (n == 3 && lead == 0xef && byte(1) == 0xbf && byte(2) >= 0xbe) return 0;
  return n;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const char c = text.front();
    const std::size_t n = utf8_sequence_length(text);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8 (a Latin-1 file name)
      text.remove_prefix(1);
      continue;
    }
    if (n > 1) {
      out.append(text.substr(0, n));
      text.remove_prefix(n);
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      // As references, which attribute values keep (a literal one is read back as a space).
      case '\t':
        out += "&#9;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        // XML 1.0 has no other control characters, not even as references.
        out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
    }
    text.remove_prefix(1);
  }
  return out;
}

std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites) {
  Counts all;
  for (const JunitSuite& s : suites) {
    const Counts c = count(s.cases);
    all.tests += c.tests;
    all.failures += c.failures;
    all.errors += c.errors;
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // No skipped count on <testsuites>: the JUnit schema Jenkins' xUnit plugin validates against
  // (junit-10.xsd) allows it on <testsuite> only, and a report it refuses is dropped.
  out += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     xml_escape(name), all.tests, all.failures, all.errors);
  for (const JunitSuite& s : suites) {
    const Counts c = count(s.cases);
    out += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
        xml_escape(s.name), c.tests, c.failures, c.errors, c.skipped);
    for (const JunitCase& k : s.cases) {
      const std::string open = fmt::format("    <testcase classname=\"{}\" name=\"{}\"",
                                           xml_escape(k.classname), xml_escape(k.name));
      if (k.outcome == JunitOutcome::kPassed) {
        out += open + "/>\n";
        continue;
      }
      if (k.outcome == JunitOutcome::kSkipped) {
        out += fmt::format("{}>\n      <skipped message=\"{}\"/>\n    </testcase>\n", open,
                           xml_escape(k.message));
        continue;
      }
      const char* element = k.outcome == JunitOutcome::kFailed ? "failure" : "error";
      out += fmt::format("{}>\n      <{} message=\"{}\">{}</{}>\n    </testcase>\n", open, element,
                         xml_escape(k.message), xml_escape(k.message), element);
    }
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

}  // namespace fsdpsim::app
