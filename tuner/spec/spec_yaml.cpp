// The spec file's text -> a YAML tree, with one-line messages naming the file and line for
// what yaml-cpp words poorly or does not survive (deep nesting, very long keys).
#include "tuner/spec/spec_yaml.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "kernels/one_line.h"
#include "kernels/yaml_strict.h"

namespace mactune::tuner {
namespace {

// A spec nests three or four levels; this many is a generated or hostile file, refused before
// yaml-cpp recurses into it (it gives up at some depth with "bad file").
constexpr int max_spec_depth = 64;

// The deepest nesting of a YAML text, estimated from flow brackets and block indentation
// ("- - - x" and "a: {b: [c]}" count each level), with the line where it is first reached.
std::pair<int, int> nesting_depth(std::string_view text) {
  int flow = 0, deepest = 0, deepest_line = 1, line = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    // Start of a line: indentation and leading sequence dashes.
    int block = 0;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i, ++block;
    int dashes = 0;
    while (i + 1 < text.size() && text[i] == '-' && (text[i + 1] == ' ' || text[i + 1] == '\t')) {
      ++dashes;
      i += 2;
      while (i < text.size() && text[i] == ' ') ++i;
    }
    char quote = 0;
    for (; i < text.size() && text[i] != '\n'; ++i) {
      const char c = text[i];
      if (quote) {
        if (c == '\\' && quote == '"')
          ++i;
        else if (c == quote)
          quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#') {
        while (i < text.size() && text[i] != '\n') ++i;
        break;
      } else if (c == '[' || c == '{') {
        ++flow;
      } else if (c == ']' || c == '}') {
        --flow;
      }
      const int depth = std::max(flow, 0) + block / 2 + dashes;
      if (depth > deepest) deepest = depth, deepest_line = line;
    }
    ++i;
    ++line;
  }
  return {deepest, deepest_line};
}

// YAML::Load with one-line messages naming the file and line for what yaml-cpp words poorly.
}  // namespace

YAML::Node load_spec_yaml(std::string_view text, const std::string& file) {
  if (const auto [depth, line] = nesting_depth(text); depth > max_spec_depth)
    spec_error(file, ':', line, ": syntax: nested more than ", max_spec_depth,
               " levels deep; a spec nests a few levels (docs/spec.md)");
  if (const auto p = yaml_strict::yaml_text_problem(text))
    spec_error(file, ':', p->line, ": syntax: ", p->what);
  try {
    // One document: a second one is found in the text (yaml-cpp 0.7's LoadAll loops forever
    // on some malformed inputs, fuzz_spec found one), and Load reads the first.
    if (const int second = yaml_strict::second_document_line(text); second > 0)
      spec_error(file, ':', second,
                 ": syntax: a second YAML document (after '---'); a spec is one document");
    YAML::Node root = YAML::Load(std::string(text));
    if (const auto p = yaml_strict::duplicate_key(root))
      spec_error(file, ':', p->line, ": ", p->what);
    return root;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line + 1;
    // yaml-cpp refuses a plain key over 1024 characters as "illegal map value".
    std::size_t begin = 0;
    for (int l = 1; l < line && begin != std::string_view::npos; ++l) {
      begin = text.find('\n', begin);
      if (begin != std::string_view::npos) ++begin;
    }
    if (begin != std::string_view::npos) {
      const std::string_view row = text.substr(begin, text.find('\n', begin) - begin);
      const auto colon = row.find(':');
      if (colon != std::string_view::npos && colon > 1024)
        spec_error(file, ':', line, ": syntax: a key of ", colon,
                   " characters; YAML keys are at most 1024");
    }
    spec_error(file, ':', line, ": syntax: ", e.msg);
  }
}

}  // namespace mactune::tuner
