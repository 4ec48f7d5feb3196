// A reader of the SVG documents tuner/report/svg.h writes, for tests: elements with their
// attributes, text and children (no DTDs, comments, CDATA or namespaces: the writer emits none).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mactune::tuner::testing {

struct SvgElement {
  std::string tag;
  std::map<std::string, std::string> attrs;
  std::string text;  // the character data directly inside, entities decoded
  std::vector<std::unique_ptr<SvgElement>> children;
  const SvgElement* parent = nullptr;

  std::string attr(const std::string& name, const std::string& fallback = "") const {
    const auto it = attrs.find(name);
    return it == attrs.end() ? fallback : it->second;
  }
  // The attribute here or on the nearest ancestor that has it (SVG's inherited properties).
  std::string inherited(const std::string& name, const std::string& fallback = "") const {
    for (const SvgElement* e = this; e; e = e->parent)
      if (e->attrs.count(name)) return e->attrs.at(name);
    return fallback;
  }
  // Every element below (this one included) with tag `t`, in document order.
  void collect(const std::string& t, std::vector<const SvgElement*>& out) const {
    if (tag == t) out.push_back(this);
    for (const auto& c : children) c->collect(t, out);
  }
};

inline std::string decode_entities(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const std::size_t semi = s.find(';', i);
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    out += name == "amp"    ? "&"
           : name == "lt"   ? "<"
           : name == "gt"   ? ">"
           : name == "quot" ? "\""
                            : "?";
    i = semi;
  }
  return out;
}

// Parses `doc`; a malformed document fails the calling test (and returns what was read).
inline std::unique_ptr<SvgElement> parse_svg(std::string_view doc) {
  auto root = std::make_unique<SvgElement>();
  root->tag = "#document";
  SvgElement* cur = root.get();
  std::size_t i = 0;
  while (i < doc.size()) {
    if (doc[i] != '<') {
      const std::size_t lt = doc.find('<', i);
      cur->text += decode_entities(doc.substr(i, lt - i));
      i = lt == std::string_view::npos ? doc.size() : lt;
      continue;
    }
    const std::size_t gt = doc.find('>', i);
    if (gt == std::string_view::npos) {
      ADD_FAILURE() << "unterminated tag at " << i;
      break;
    }
    std::string_view tag = doc.substr(i + 1, gt - i - 1);
    i = gt + 1;
    if (tag.starts_with('/')) {
      if (cur->tag != tag.substr(1))
        ADD_FAILURE() << "</" << tag.substr(1) << "> closes <" << cur->tag << ">";
      if (cur->parent) cur = const_cast<SvgElement*>(cur->parent);
      continue;
    }
    const bool empty = tag.ends_with('/');
    if (empty) tag.remove_suffix(1);
    auto e = std::make_unique<SvgElement>();
    e->parent = cur;
    std::size_t k = tag.find_first_of(" \n");
    e->tag = std::string(tag.substr(0, k));
    while (k != std::string_view::npos && k < tag.size()) {
      const std::size_t eq = tag.find('=', k);
      if (eq == std::string_view::npos) break;
      std::string_view name = tag.substr(k, eq - k);
      while (!name.empty() && (name.front() == ' ' || name.front() == '\n')) name.remove_prefix(1);
      const std::size_t q1 = tag.find('"', eq), q2 = tag.find('"', q1 + 1);
      e->attrs[std::string(name)] = decode_entities(tag.substr(q1 + 1, q2 - q1 - 1));
      k = q2 + 1;
    }
    SvgElement* raw = e.get();
    cur->children.push_back(std::move(e));
    if (!empty) cur = raw;
  }
  if (cur != root.get()) ADD_FAILURE() << "<" << cur->tag << "> is not closed";
  return root;
}

}  // namespace mactune::tuner::testing
