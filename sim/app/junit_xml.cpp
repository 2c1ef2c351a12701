#include "sim/app/junit_xml.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fsdpsim::app {
namespace {

struct Counts {
  std::size_t tests = 0;
  std::size_t failures = 0;
  std::size_t errors = 0;
};

Counts count(const std::vector<JunitCase>& cases) {
  Counts c;
  c.tests = cases.size();
  c.failures =
      static_cast<std::size_t>(std::count_if(cases.begin(), cases.end(), [](const JunitCase& k) {
        return k.outcome == JunitOutcome::kFailed;
      }));
  c.errors =
      static_cast<std::size_t>(std::count_if(cases.begin(), cases.end(), [](const JunitCase& k) {
        return k.outcome == JunitOutcome::kError;
      }));
  return c;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
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
      case '\t':
      case '\n':
      case '\r':
        out += c;
        break;
      default:
        out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
    }
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
  out += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                     xml_escape(name), all.tests, all.failures, all.errors);
  for (const JunitSuite& s : suites) {
    const Counts c = count(s.cases);
    out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
                       xml_escape(s.name), c.tests, c.failures, c.errors);
    for (const JunitCase& k : s.cases) {
      const std::string open = fmt::format("    <testcase classname=\"{}\" name=\"{}\"",
                                           xml_escape(k.classname), xml_escape(k.name));
      if (k.outcome == JunitOutcome::kPassed) {
        out += open + "/>\n";
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
