// What a user reads of a tune, for the shapes of the shipped quick, wide and skip specs
// (configs/cpu-*.yaml, databases of synthetic rows: tests/tuner/report_fixture.h): every chart
// the report writes has each text element inside its canvas and no two of them overlapping
// (legend entries included), measured with the SVG writer's own font metrics; the speedup
// chart draws the grid's rates as lines and the search's probes as one series; report.md's
// paragraphs are wrapped; tune's closing table and report.md give every bucket the same
// break-even, on the hit rate or the skip ratio.
//
// MACTUNE_KEEP_REPORTS=DIR keeps the reports written (DIR/<spec>/) to look at them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "kernels/cpu/session.h"
#include "report_fixture.h"
#include "svg_parse.h"
#include "tuner/report/report.h"
#include "tuner/report/report_summary.h"
#include "tuner/report/report_text.h"
#include "tuner/report/svg_text.h"

namespace mactune::tuner {
namespace {

using testing::parse_svg;
using testing::SvgElement;
using testing::TempDir;

// The report of a spec's fixture database, written as `tune` writes it at its end.
class ReportOfSpec : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (cpu::instances().empty()) GTEST_SKIP() << "no CPU instances in this build";
    const char* src = std::getenv("MACTUNE_SOURCE_DIR");
    ASSERT_NE(src, nullptr) << "MACTUNE_SOURCE_DIR is set by ctest";
    db::Store store = db::Store::open(dir_.file("t.db"));
    fixture_ =
        testing::fill_from_spec(store, std::string(src) + "/configs/" + GetParam() + ".yaml");
    decided_ = testing::decide_fixture(store, fixture_);
    out_ = dir_.file("rep");
    if (const char* keep = std::getenv("MACTUNE_KEEP_REPORTS"))
      out_ = std::string(keep) + "/" + GetParam();
    files_ = write_report(store, decided_, out_);
  }
  std::vector<std::string> charts() const {
    std::vector<std::string> out;
    for (const std::string& f : files_)
      if (f.ends_with(".svg")) out.push_back(f);
    return out;
  }

  TempDir dir_;
  testing::SpecFixture fixture_;
  Decided decided_;
  std::string out_;
  std::vector<std::string> files_;
};

double number(const std::string& text) {
  return text.empty() ? 0 : std::stod(text);
}

// The canvas box of a <text> element, as the writer's metrics measure it.
svg::Box box_of(const SvgElement& t) {
  const svg::Font font{number(t.inherited("font-size")), t.inherited("font-weight") == "bold"};
  const std::string a = t.inherited("text-anchor", "start");
  const svg::Anchor anchor = a == "middle" ? svg::Anchor::middle
                             : a == "end"  ? svg::Anchor::end
                                           : svg::Anchor::start;
  const std::string tr = t.attr("transform");
  if (tr.empty())
    return svg::text_box(t.text, font, number(t.attr("x")), number(t.attr("y")), anchor);
  std::smatch m;
  const std::regex turned(R"(translate\(([-0-9.]+),([-0-9.]+)\) rotate\(-90\))");
  EXPECT_TRUE(std::regex_match(tr, m, turned)) << "a transform the writer does not make: " << tr;
  return svg::text_box(t.text, font, std::stod(m[1]), std::stod(m[2]), anchor, true);
}

// The box of a legend entry: its swatch (line or circle) and its text.
svg::Box entry_box(const SvgElement& g) {
  svg::Box b{1e9, 1e9, -1e9, -1e9};
  const auto add = [&](const svg::Box& o) {
    b = {std::min(b.x0, o.x0), std::min(b.y0, o.y0), std::max(b.x1, o.x1), std::max(b.y1, o.y1)};
  };
  for (const auto& c : g.children) {
    if (c->tag == "text") add(box_of(*c));
    if (c->tag == "line")
      add({number(c->attr("x1")), number(c->attr("y1")) - 1, number(c->attr("x2")),
           number(c->attr("y2")) + 1});
    if (c->tag == "circle") {
      const double r = number(c->attr("r"));
      add({number(c->attr("cx")) - r, number(c->attr("cy")) - r, number(c->attr("cx")) + r,
           number(c->attr("cy")) + r});
    }
  }
  return b;
}

std::string where(const svg::Box& b) {
  std::ostringstream o;
  o << "[" << b.x0 << ", " << b.y0 << " .. " << b.x1 << ", " << b.y1 << "]";
  return o.str();
}

TEST_P(ReportOfSpec, EveryTextOfEveryChartLiesInsideItsCanvasApartFromTheOthers) {
  const auto svgs = charts();
  ASSERT_GE(svgs.size(), std::string(GetParam()) == "cpu-skip" ? 1u : 2u);
  for (const std::string& path : svgs) {
    const auto doc = parse_svg(testing::read_file(path));
    ASSERT_EQ(doc->children.size(), 1u) << path;
    const SvgElement& root = *doc->children[0];
    ASSERT_EQ(root.tag, "svg");
    const double width = number(root.attr("width")), height = number(root.attr("height"));
    EXPECT_EQ(root.attr("font-family"), svg::kFontFamily) << "the font the metrics are of";
    std::vector<const SvgElement*> texts;
    root.collect("text", texts);
    ASSERT_GE(texts.size(), 5u) << path;
    std::vector<svg::Box> boxes;
    for (const SvgElement* t : texts) {
      boxes.push_back(box_of(*t));
      EXPECT_TRUE(boxes.back().inside(width, height))
          << path << ": '" << t->text << "' at " << where(boxes.back()) << " leaves the " << width
          << " x " << height << " canvas";
    }
    for (std::size_t i = 0; i < boxes.size(); ++i)
      for (std::size_t j = i + 1; j < boxes.size(); ++j)
        EXPECT_FALSE(boxes[i].overlaps(boxes[j]))
            << path << ": '" << texts[i]->text << "' " << where(boxes[i]) << " and '"
            << texts[j]->text << "' " << where(boxes[j]) << " overlap";

    std::vector<const SvgElement*> groups, entries;
    root.collect("g", groups);
    for (const SvgElement* g : groups)
      if (g->attr("class") == "legend-entry") entries.push_back(g);
    ASSERT_FALSE(entries.empty()) << path;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const svg::Box a = entry_box(*entries[i]);
      EXPECT_TRUE(a.inside(width, height)) << path << ": legend entry " << i;
      for (std::size_t j = i + 1; j < entries.size(); ++j)
        EXPECT_FALSE(a.overlaps(entry_box(*entries[j])))
            << path << ": legend entries " << i << " and " << j << " overlap";
    }
  }
}

// The legend labels of a chart, in order.
std::vector<std::string> legend_of(const std::string& path) {
  const auto doc = parse_svg(testing::read_file(path));
  std::vector<const SvgElement*> groups;
  doc->collect("g", groups);
  std::vector<std::string> out;
  for (const SvgElement* g : groups)
    if (g->attr("class") == "legend-entry")
      for (const auto& c : g->children)
        if (c->tag == "text") out.push_back(c->text);
  return out;
}

TEST_P(ReportOfSpec, TheSpeedupChartDrawsTheGridAsLinesAndTheProbesAsOneSeries) {
  const std::string shape = decided_.decisions.at(0).bucket.shape.text();
  if (std::string(GetParam()) == "cpu-skip") {
    EXPECT_EQ(
        legend_of(out_ + "/skip_" + shape + ".svg"),
        (std::vector<std::string>{"skip 0", "skip 0.8", "skip 0.9", "skip 0.95", "skip 0.99"}));
    return;
  }
  ASSERT_GT(fixture_.probes, 0u) << "the spec searches: its fixture has probes";
  const std::vector<std::string> grid = std::string(GetParam()) == "cpu-quick"
                                            ? std::vector<std::string>{"0", "0.5", "1"}
                                            : std::vector<std::string>{"0", "1"};
  std::vector<std::string> want;
  for (const std::string& h : grid) want.push_back("hit rate " + h);
  want.push_back("break-even probes");
  const std::string path = out_ + "/speedup_" + shape + ".svg";
  EXPECT_EQ(legend_of(path), want);
  // One marker per probe: every hit rate off the grid of every bucket.
  std::size_t probe_points = 0;
  for (const auto& d : decided_.decisions)
    for (const auto& p : d.break_even.curve)
      probe_points += std::none_of(grid.begin(), grid.end(), [&](const std::string& h) {
        return std::stod(h) == p.hit_rate;
      });
  EXPECT_GT(probe_points, 0u);
  const auto doc = parse_svg(testing::read_file(path));
  std::vector<const SvgElement*> circles;
  doc->collect("circle", circles);
  std::size_t markers = 0;
  for (const SvgElement* c : circles) {
    const auto tip = std::find_if(c->children.begin(), c->children.end(),
                                  [](const auto& e) { return e->tag == "title"; });
    markers += tip != c->children.end() && (*tip)->text.starts_with("break-even probes:");
  }
  EXPECT_EQ(markers, probe_points);
}

TEST_P(ReportOfSpec, ReportMarkdownIsWrapped) {
  const std::string md = testing::read_file(out_ + "/report.md");
  std::istringstream lines(md);
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    if (line.starts_with('|')) continue;  // a table row cannot be wrapped
    std::size_t columns = 0;
    for (unsigned char ch : line) columns += (ch & 0xC0) != 0x80;
    EXPECT_LE(columns, 100u) << "report.md:" << n + 1 << ": " << line;
  }
  EXPECT_NE(md.find("\n  "), std::string::npos) << "a list item continues, indented";
}

// Break-even cells per bucket key: from tune's closing table (its last column) and from
// report.md (the last column of each shape's hit-rate and skip-ratio tables).
std::map<std::string, std::string> closing_cells(const std::string& table) {
  std::map<std::string, std::string> out;
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // |---|
  while (std::getline(lines, line)) {
    const std::string key = line.substr(2, line.find(" |", 2) - 2);
    const std::size_t end = line.rfind(" |"), start = line.rfind(" | ", end - 1) + 3;
    out[key] = line.substr(start, end - start);
  }
  return out;
}

std::map<std::string, std::string> report_cells(const std::string& md, const std::string& header) {
  std::map<std::string, std::string> out;
  std::istringstream lines(md);
  std::string line, shape;
  bool in_table = false;
  while (std::getline(lines, line)) {
    if (line.starts_with("## ")) shape = line.substr(3);
    if (!line.starts_with('|')) {
      in_table = false;
      continue;
    }
    if (line.starts_with("| context | batch |")) {
      in_table = line.ends_with(header);
      std::getline(lines, line);  // |---|
      continue;
    }
    if (!in_table) continue;
    std::vector<std::string> cells;
    for (std::size_t at = 2; at < line.size();) {
      const std::size_t bar = line.find(" |", at);
      cells.push_back(line.substr(at, bar - at));
      at = bar + 3;
    }
    out[shape + "_b" + cells[1] + "_c" + cells[0]] = cells.back();
  }
  return out;
}

TEST_P(ReportOfSpec, TheClosingTableAndTheReportAgreeOnEveryBreakEven) {
  const bool skip = std::string(GetParam()) == "cpu-skip";
  const std::string table = summary_table(decided_.decisions);
  EXPECT_EQ(table.rfind(skip ? "| bucket | MAC config | full config | speedup by skip ratio | "
                               "break-even skip ratio |"
                             : "| bucket | MAC config | full config | speedup by hit rate | "
                               "break-even hit rate |",
                        0),
            0u)
      << table;
  const auto closing = closing_cells(table);
  const auto report = report_cells(testing::read_file(out_ + "/report.md"),
                                   skip ? "| break-even skip ratio |" : "| break-even |");
  ASSERT_EQ(closing.size(), decided_.decisions.size()) << table;
  EXPECT_EQ(closing, report) << table;
  EXPECT_TRUE(std::any_of(closing.begin(), closing.end(),
                          [](const auto& kv) { return kv.second.find('(') != std::string::npos; }))
      << "the fixture gives buckets a bracketed break-even:\n"
      << table;
  if (!skip) return;
  for (const auto& [key, cell] : closing)  // the fixture's MAC: slower at 0, faster from 0.8
    EXPECT_EQ(cell, "0.8 (0, 0.8]") << key;
}

TEST(ReportText, WrapMarkdownBreaksParagraphsAndListItemsOnly) {
  const std::string a(40, 'a'), b(30, 'b'), c(20, 'c');
  const std::string table = "| " + std::string(120, 'x') + " |";
  // Breaking after the b's would start the next line with "- ": a new list item.
  EXPECT_EQ(wrap_markdown("- " + a + " " + b + " - " + c + " d\n\n" + table + "\n", 80),
            "- " + a + " " + b + " -\n  " + c + " d\n\n" + table + "\n");
  EXPECT_EQ(wrap_markdown("`" + std::string(120, 'y') + "`"), "`" + std::string(120, 'y') + "`")
      << "nothing to break at";
  const std::string code = "```\n" + std::string(50, 'z') + " " + std::string(60, 'z') + "\n```\n";
  EXPECT_EQ(wrap_markdown(code), code) << "fenced code stays";
}

INSTANTIATE_TEST_SUITE_P(Configs, ReportOfSpec,
                         ::testing::Values("cpu-quick", "cpu-wide", "cpu-skip"), [](const auto& p) {
                           std::string n = p.param;
                           std::erase(n, '-');
                           return n;
                         });

}  // namespace
}  // namespace mactune::tuner
