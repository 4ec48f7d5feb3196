// Strict reading of the project's YAML files (sweep specs, layer schedules): what yaml-cpp
// accepts but a spec must not be. Shared by tuner/spec/spec_yaml.cpp and replay/schedule.cpp, which
// share no other layer; it includes nothing of yaml-cpp (kernels/ never does): the tree checks
// are templates over the node type, instantiated with YAML::Node by the readers.
//
//   - Text checks, before yaml-cpp reads the text (yaml_text_problem):
//     * a NUL byte, or a NUL escape (\0, \x00, \u0000) in a double-quoted value: no name, path
//       or expression holds one, and yaml-cpp words the escape as "unknown escape character";
//     * a quoted value that does not close on the line it opens. YAML lets a quoted scalar
//       span lines, so one missing quote makes yaml-cpp read on to the next quote character,
//       or to the end of the file: the keys in between vanish into one value and their
//       defaults are used without a word. No spec or schedule needs a multi-line quoted value
//       (long text goes in a block scalar, `description: |`), so the rule costs nothing and
//       names the line where the quote opened, which no check of the parsed keys could.
//   - Tree checks, after it (duplicate_key): a key given twice in one mapping, at any depth
//     (yaml-cpp keeps both; a lookup finds the first, a walk sees both).
//   - One document: the readers load every document and refuse a second (`---`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace mactune::yaml_strict {

struct Problem {
  int line = 0;  // 1-based
  std::string what;
};

namespace detail {

inline bool is_space(char c) {
  return c == ' ' || c == '\t';
}

// The indentation of the line starting at `at` (spaces), and whether it is blank or a comment.
inline int indent_of(std::string_view text, std::size_t at, bool* blank) {
  int n = 0;
  while (at + n < text.size() && text[at + n] == ' ') ++n;
  const std::size_t c = at + n;
  *blank = c >= text.size() || text[c] == '\n' || text[c] == '\r' || text[c] == '#';
  return n;
}

}  // namespace detail

// The first NUL or unclosed quoted value of a YAML text, or nullopt.
inline std::optional<Problem> yaml_text_problem(std::string_view text) {
  using detail::is_space;
  int line = 1;
  std::size_t i = 0;
  // Inside a block scalar (`key: |` or `>`): lines indented more than `block_indent` are its
  // text, where quotes and '#' mean nothing.
  int block_indent = -1;
  while (i < text.size()) {
    const std::size_t line_start = i;
    std::size_t line_end = text.find('\n', i);
    if (line_end == std::string_view::npos) line_end = text.size();
    const std::string_view row = text.substr(line_start, line_end - line_start);
    if (const auto nul = row.find('\0'); nul != std::string_view::npos)
      return Problem{line,
                     "a NUL byte at column " + std::to_string(nul + 1) + " (a YAML file is text)"};
    bool blank = false;
    const int indent = detail::indent_of(text, line_start, &blank);
    if (block_indent >= 0 && (blank || indent > block_indent)) {
      i = line_end + 1;
      ++line;
      continue;
    }
    block_indent = -1;
    // Scan the line: quoted values open where a value or key starts.
    bool token_start = true;  // at the start of a key or value (after indentation, ": ", "- ")
    for (std::size_t j = 0; j < row.size(); ++j) {
      const char c = row[j];
      if (c == '\r') break;
      if (c == '#' && (j == 0 || is_space(row[j - 1]))) break;  // a comment
      if ((c == '"' || c == '\'') && token_start) {
        const std::size_t open = j;
        bool closed = false;
        for (++j; j < row.size(); ++j) {
          if (c == '\'' && row[j] == '\'') {
            if (j + 1 < row.size() && row[j + 1] == '\'') {  // '' is an escaped quote
              ++j;
              continue;
            }
            closed = true;
            break;
          }
          if (c == '"' && row[j] == '\\') {
            const std::string_view esc = row.substr(j + 1);
            if (esc.starts_with('0') || esc.starts_with("x00") || esc.starts_with("u0000") ||
                esc.starts_with("U00000000"))
              return Problem{line, "a NUL character (\\" + std::string(esc.substr(0, 1)) +
                                       "...) in a quoted value at column " + std::to_string(j + 1) +
                                       ": no name or path holds one"};
            ++j;
            continue;
          }
          if (c == '"' && row[j] == '"') {
            closed = true;
            break;
          }
        }
        if (!closed)
          return Problem{line, std::string("the quoted value opened at column ") +
                                   std::to_string(open + 1) + " (" + c +
                                   ") does not close on its line (a quoted value ends on the "
                                   "line it starts; long text goes in a block scalar, key: |)"};
        // After a closed quoted value: a separator, a comment or the end of the line (YAML
        // allows nothing else; `'it's'` closed after "it").
        std::size_t k = j + 1;
        while (k < row.size() && is_space(row[k])) ++k;
        if (k < row.size() && row[k] != ':' && row[k] != ',' && row[k] != ']' && row[k] != '}' &&
            row[k] != '#' && row[k] != '\r')
          return Problem{line, std::string("the quoted value opened at column ") +
                                   std::to_string(open + 1) + " (" + c +
                                   ") is followed by text "
                                   "at column " +
                                   std::to_string(k + 1) +
                                   " (a quote inside the value? double it in '...', escape it "
                                   "in \"...\")"};
        token_start = false;
        continue;
      }
      if (is_space(c)) continue;
      if (c == '[' || c == '{' || c == ',') {
        token_start = true;
        continue;
      }
      if ((c == ':' || c == '-' || c == '?') && (j + 1 == row.size() || is_space(row[j + 1]))) {
        // "key: value", "- item", "? key": a value starts after it.
        // A block scalar indicator after it (`key: |`, `- >-`): its text is the lines
        // indented more than this line.
        std::size_t k = j + 1;
        while (k < row.size() && is_space(row[k])) ++k;
        if (c != '?' && k < row.size() && (row[k] == '|' || row[k] == '>')) block_indent = indent;
        token_start = true;
        continue;
      }
      token_start = false;
    }
    i = line_end + 1;
    ++line;
  }
  return std::nullopt;
}

// The line of the marker that starts a second document: a `---` (or a `...` end marker) at
// column 0 after the first document's content, or 0 when there is none. Lines inside a block
// scalar are indented, so a column-0 marker is always one.
inline int second_document_line(std::string_view text) {
  bool content = false;
  int line = 1;
  for (std::size_t at = 0; at < text.size(); ++line) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view row = text.substr(at, end - at);
    const bool marker = (row.starts_with("---") || row.starts_with("...")) &&
                        (row.size() == 3 || detail::is_space(row[3]) || row[3] == '\r');
    if (marker && content) return line;
    const std::size_t first = row.find_first_not_of(" \t\r");
    if (!marker && first != std::string_view::npos && row[first] != '#') content = true;
    if (marker && row.substr(3).find_first_not_of(" \t\r") != std::string_view::npos &&
        row[3 + row.substr(3).find_first_not_of(" \t\r")] != '#')
      content = true;  // "--- {a: 1}": content on the marker's line
    at = end + 1;
  }
  return 0;
}

// The first key that appears twice in one mapping of the tree under `n` (any depth), with
// the line of its second appearance. Node: YAML::Node (IsMap, IsSequence, IsScalar, Scalar,
// Mark().line, begin/end with ->first/->second on maps, plain iteration on sequences).
template <class Node>
std::optional<Problem> duplicate_key(const Node& n, const std::string& where = "") {
  if (n.IsMap()) {
    std::map<std::string, int> first_line;  // key -> line of its first appearance
    for (auto a = n.begin(); a != n.end(); ++a) {
      const std::string key = a->first.IsScalar() ? a->first.Scalar() : std::string();
      const std::string path = where.empty() ? key : where + "." + key;
      const int line = a->first.Mark().line + 1;
      if (a->first.IsScalar()) {
        const auto [it, fresh] = first_line.emplace(key, line);
        if (!fresh)
          return Problem{line, path + ": given twice (first at line " + std::to_string(it->second) +
                                   "; each key appears once in a mapping)"};
      }
      if (auto p = duplicate_key(a->second, path)) return p;
    }
  } else if (n.IsSequence()) {
    std::size_t i = 0;
    for (auto it = n.begin(); it != n.end(); ++it, ++i)
      if (auto p = duplicate_key(*it, where + "[" + std::to_string(i) + "]")) return p;
  }
  return std::nullopt;
}

}  // namespace mactune::yaml_strict
