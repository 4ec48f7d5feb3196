// A JSON parse error as a person reads it: "LINE:COL: expected X, found Y", from the parser's
// own message (nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5:
// syntax error while parsing value - invalid literal; last read: 'NaN'"), without its
// exception tag. The parser stays the callers' (this header includes no JSON library).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace mactune::detail {

// Line and column (1-based) of byte `pos` (0-based) of `text`.
inline std::pair<int, int> line_column(std::string_view text, std::size_t pos) {
  int line = 1, col = 1;
  for (std::size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// `what`: the parser's message; `byte`: its position (nlohmann's parse_error::byte, the count
// of bytes read, so the offending byte is byte - 1), or npos when it has none (a number that
// overflows). Returns "LINE:COL: expected ..., found ...".
inline std::string json_error_text(std::string_view text, std::size_t byte, std::string what) {
  if (!what.empty() && what.front() == '[') {  // "[json.exception.parse_error.101] "
    const auto close = what.find("] ");
    if (close != std::string::npos) what.erase(0, close + 2);
  }
  const auto all_space = text.find_first_not_of(" \t\r\n") == std::string_view::npos;
  if (all_space) return "1:1: expected a JSON value, found an empty file";
  // A number too large for a double: "number overflow parsing '1e400'".
  if (const auto at = what.find("number overflow parsing '"); at != std::string::npos) {
    const std::string token = what.substr(at + 25, what.find('\'', at + 25) - (at + 25));
    const auto pos = text.find(token);
    const auto [l, c] = line_column(text, pos == std::string_view::npos ? 0 : pos);
    return std::to_string(l) + ":" + std::to_string(c) + ": expected a finite number, found '" +
           token + "' (too large for a double)";
  }
  const std::size_t pos = byte == std::string_view::npos || byte == 0 ? 0 : byte - 1;
  const auto [line, col] = line_column(text, pos);
  const std::string where = std::to_string(line) + ":" + std::to_string(col) + ": ";
  const auto found_byte = [&]() -> std::string {
    if (pos >= text.size()) return "the end of the file";
    const auto ch = static_cast<unsigned char>(text[pos]);
    if (ch == 0) return "a NUL byte";
    char buf[32];
    if (ch < 0x20 || ch >= 0x7f) {
      std::snprintf(buf, sizeof buf, "byte 0x%02X", ch);
      return buf;
    }
    return std::string("'") + static_cast<char>(ch) + "'";
  };
  if (what.find("expected end of input") != std::string::npos)
    return where + "expected the end of the JSON document, found " + found_byte() +
           " (trailing data after it)";
  if (what.find("ill-formed UTF-8") != std::string::npos)
    return where + "expected UTF-8 text, found " + found_byte() + " (invalid UTF-8)";
  if (what.find("control character") != std::string::npos)
    return where + "expected a character of a string, found " + found_byte() +
           " (control characters must be escaped)";
  std::string last;
  if (const auto at = what.find("last read: '"); at != std::string::npos) {
    auto end = what.find("'; ", at + 12);  // "last read: 'x'; expected '[', ..."
    if (end == std::string::npos) end = what.rfind('\'');
    last = what.substr(at + 12, end > at + 12 ? end - (at + 12) : 0);
  }
  if (pos >= text.size() || what.find("unexpected end of input") != std::string::npos)
    return where + "expected more JSON, found the end of the file (it is cut short)";
  if (last == "N" || last == "Na" || last == "NaN" || last == "I" || last.rfind("Inf", 0) == 0 ||
      last.rfind("-I", 0) == 0 || last == "n" || last == "na" || last == "nan")
    return where + "expected a JSON value, found '" + last +
           "' (JSON has no NaN or infinity; a value must be a finite number)";
  std::string expected = "a JSON value";
  if (const auto at = what.find("; expected "); at != std::string::npos)
    expected = what.substr(at + 11);
  else if (const auto at2 = what.find("while parsing "); at2 != std::string::npos)
    expected = "a JSON " + what.substr(at2 + 14, what.find(" - ", at2) - (at2 + 14));
  return where + "expected " + expected + ", found " +
         (last.empty() ? found_byte() : "'" + last + "'");
}

}  // namespace mactune::detail
