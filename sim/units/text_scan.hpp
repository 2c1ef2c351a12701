// What is text: bytes that are well-formed UTF-8 (RFC 3629) and no control characters a terminal
// would run. Shared by every reader of user text, the simulator's (sim/app/json_file.hpp) and
// the measurement harness's options and plan files (calibrate/harness/util.hpp), which builds on
// its own with the CUDA toolkit alone: header-only, the standard library only.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace fsdpsim {

// "U+001B" (digits 4) or "0xFF" (prefix "0x", digits 2).
inline std::string hex_name(unsigned value, const char* prefix, int digits) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = prefix;
  for (int d = digits - 1; d >= 0; --d) out += kHex[(value >> (4 * d)) & 0xfU];
  return out;
}

// The offset of the first byte of `text` that does not start a well-formed UTF-8 sequence
// (RFC 3629 Sec. 4: no overlong forms, no surrogates U+D800-U+DFFF, nothing above U+10FFFF), or
// nothing when all of it is UTF-8.
inline std::optional<std::size_t> find_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    // Sequence length and the range of the second byte.
    std::size_t length = 1;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < low || second > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < 0x80 || next > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

// The first control character of `text` that `allowed` does not list: a C0 code (below 0x20),
// DEL, or a C1 code (U+0080-U+009F, in UTF-8 0xC2 0x80-0x9F), which terminals execute: ESC
// starts the sequences that recolour, move the cursor or retitle the window. Its byte offset
// and a printable name ("U+001B").
struct ControlCharacter {
  std::size_t offset = 0;
  std::string name;
};
inline std::optional<ControlCharacter> find_control_character(std::string_view text,
                                                              std::string_view allowed) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool c0_or_del = byte < 0x20 || byte == 0x7f;
    if (c0_or_del && allowed.find(text[i]) == std::string_view::npos)
      return ControlCharacter{i, hex_name(byte, "U+", 4)};
    if (byte == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return ControlCharacter{i, hex_name(next, "U+", 4)};
    }
  }
  return std::nullopt;
}

// The first place where `text` is not text: a control character `allowed` does not list, or a
// byte that does not start well-formed UTF-8, whichever comes first. Its byte offset and name:
// "U+001B" for a control character, "0xE9" for such a byte.
inline std::optional<ControlCharacter> find_non_text(std::string_view text,
                                                     std::string_view allowed) {
  std::optional<ControlCharacter> control = find_control_character(text, allowed);
  const std::optional<std::size_t> invalid = find_invalid_utf8(text);
  if (invalid && (!control || *invalid < control->offset))
    return ControlCharacter{*invalid,
                            hex_name(static_cast<unsigned char>(text[*invalid]), "0x", 2)};
  return control;
}

// `text` with each control character but those `allowed` (line feed and tab unless told) written
// as its name in angle brackets ("<U+001B>"), and each byte that is not UTF-8 as its value
// ("<0xFF>"): for messages that echo what a user typed or a file held, and, with nothing allowed,
// for a name shown on one line.
inline std::string escape_control_characters(std::string_view text,
                                             std::string_view allowed = "\t\n") {
  std::string out;
  out.reserve(text.size());
  while (const std::optional<ControlCharacter> bad = find_non_text(text, allowed)) {
    out.append(text.substr(0, bad->offset));
    out += '<';
    out += bad->name;
    out += '>';
    // A C1 control character is two bytes in UTF-8 (0xC2 0x80-0x9F); the rest are one.
    const bool c1 =
        static_cast<unsigned char>(text[bad->offset]) == 0xc2 && bad->name.starts_with("U+");
    text.remove_prefix(bad->offset + (c1 ? 2 : 1));
  }
  out.append(text);
  return out;
}

}  // namespace fsdpsim
