// JUnit XML, the test report format CI systems (GitHub Actions reporters, GitLab's
// artifacts:reports:junit, Jenkins) display: <testsuites> of <testsuite> of <testcase>, with a
// <failure>, <error> or <skipped> child when a case did not pass. Deterministic: no timestamps or
// durations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fsdpsim::app {

enum class JunitOutcome { kPassed, kFailed, kError, kSkipped };

struct JunitCase {
  std::string classname;  // the scenario file
  std::string name;       // the check, e.g. "tokens_per_s_per_gpu >= 3000"
  JunitOutcome outcome = JunitOutcome::kPassed;
  std::string message;  // the failure, error or skip message (attribute; text of failure/error)
};

struct JunitSuite {
  std::string name;
  std::vector<JunitCase> cases;
};

// Escapes text for an XML attribute value or element content: & < > " ' become entities, tab,
// line feed and carriage return character references, characters XML 1.0 forbids (the other
// control characters) '?', and bytes that are not UTF-8 U+FFFD.
std::string xml_escape(std::string_view text);

// A complete document with an XML declaration, `<testsuites name=...>` and the counts (tests,
// failures, errors, skipped) on it and on every suite.
std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites);

}  // namespace fsdpsim::app
