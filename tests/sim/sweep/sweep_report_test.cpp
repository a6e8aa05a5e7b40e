// Tests of the HTML report: self-contained (no http/https, no src= or external href), every
// element closed in order (parsed with a small XML-style checker), the scatter has one point per
// simulated candidate, the top-K table its rows, and the best plan's timeline is inlined.
#include "sim/sweep/sweep_report.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "sim/sweep/sweep_json.hpp"
#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int64_t count(const std::string& s, const std::string& what) {
  int64_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Checks that tags nest and close properly; returns "" or the first problem.
std::string check_well_formed(const std::string& html) {
  const std::set<std::string> void_elements = {"meta", "br", "hr", "img", "link", "input"};
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string::npos) {
    if (html.compare(i, 4, "<!--") == 0) {
      i = html.find("-->", i);
      if (i == std::string::npos) return "unclosed comment";
      continue;
    }
    if (html.compare(i, 2, "<!") == 0 || html.compare(i, 2, "<?") == 0) {
      i = html.find('>', i);
      continue;
    }
    const size_t end = html.find('>', i);
    if (end == std::string::npos) return "unclosed tag";
    std::string tag = html.substr(i + 1, end - i - 1);
    const bool closing = !tag.empty() && tag[0] == '/';
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (closing) tag = tag.substr(1);
    const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (name.empty()) return "empty tag name at " + std::to_string(i);
    if (closing) {
      if (stack.empty() || stack.back() != name)
        return "</" + name + "> closes " + (stack.empty() ? "nothing" : "<" + stack.back() + ">");
      stack.pop_back();
    } else if (!self_closing && !void_elements.count(name)) {
      stack.push_back(name);
      if (name == "style" || name == "script") {  // raw text
        const size_t close = html.find("</" + name + ">", end);
        if (close == std::string::npos) return "unclosed " + name;
        i = close;
        continue;
      }
    }
    i = end + 1;
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

TEST(SweepReport, WellFormednessCheckerCatchesMistakes) {
  EXPECT_EQ(check_well_formed("<html><body><p>a</p><br/><meta charset=\"x\"></body></html>"), "");
  EXPECT_NE(check_well_formed("<html><body><p>a</body></html>"), "");
  EXPECT_NE(check_well_formed("<html><body>"), "");
}

TEST(SweepReport, SelfContainedWellFormedAndComplete) {
  const SweepRequest req = testing::tiny_request();
  SweepOptions o;
  o.simulate = testing::fake_simulate;
  const SweepResult r = run_sweep(req, o);
  const Plan best = plan_of(req, r.best().candidate);
  const sim::SimulationResult best_result = testing::fake_simulate(best);
  const std::string html =
      sweep_report_html(req, r, 5, &best, &best_result, "mplan sweep --gpus 4 <&>");
  EXPECT_EQ(check_well_formed(html), "");
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=")));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // One scatter point per simulated candidate; the top-5 table has 5 rows + header.
  EXPECT_EQ(count(html, "<circle"), r.simulated);
  EXPECT_EQ(count(html, "<circle class=\"best\""), 1);
  EXPECT_EQ(count(html, "<circle class=\"top\""), 4);
  // The rejected rules and the escaped command line.
  EXPECT_THAT(html, HasSubstr(r.invalid_by_rule[0].example.substr(0, 30)));
  EXPECT_THAT(html, HasSubstr("mplan sweep --gpus 4 &lt;&amp;&gt;"));
  // The timeline: inline SVG without its XML declaration.
  EXPECT_THAT(html, HasSubstr("Pipeline timeline of the best plan"));
  EXPECT_THAT(html, Not(HasSubstr("<?xml")));
  EXPECT_EQ(count(html, "<svg"), 2);
}

TEST(SweepReport, LongSchedulesAreDrawnShortened) {
  Plan p;
  p.model = load_model("gpt3-175b");
  p.cluster = load_cluster("dgx-a100-80g");
  p.parallel.tp = p.parallel.etp = 8;
  p.parallel.pp = 16;
  p.parallel.global_batch_size = 1536;
  const std::string svg = best_timeline_svg(p);
  // 1536 micro-batches over 16 stages: max(2 x 16, 512 / 16) = 32 of them are drawn.
  EXPECT_NE(svg.find("drawn with 32 of its 1536 micro-batches"), std::string::npos)
      << svg.substr(0, 400);
  EXPECT_EQ(check_well_formed(svg), "");
}

TEST(SweepReport, EscapesText) {
  EXPECT_EQ(html_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
}

}  // namespace
}  // namespace mplan::sweep
