// `mplan show-schedule` run as a program: exit codes, error lines naming the flag, the JSON
// document's shape, the human timeline and summary, the SVG file, --plan.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.hpp"

namespace {

using mplan::cli_test::Result;
using mplan::cli_test::slurp;
using mplan::cli_test::temp_path;
using mplan::cli_test::write_temp;

// Runs `mplan show-schedule ARGS`.
Result run(const std::string& args) { return mplan::cli_test::run("show-schedule " + args); }

TEST(ShowScheduleCli, TimelineAndSummary) {
  const Result r = run("--pp 4 --microbatches 8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1f1b schedule: pp 4, 8 micro-batches, vpp 1; cost per pass: F 1, B 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 0 F0 F1 F2 F3 ......"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 3 .........F0 B0    F1 B1"), std::string::npos) << r.out;
  // (m + pp - 1)(f + b) = 33; bubble 3/11.
  EXPECT_NE(r.out.find("makespan 33, bubble fraction 27.27 % (closed form: makespan 33, "
                       "bubble 27.27 %)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank  warm-up  peak in-flight  busy  idle\n"
                       "   0        3               4    24     9\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(ShowScheduleCli, JsonShape) {
  const Result r = run("--pp 2 --microbatches 4 --vpp 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(r.out);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"pp", "microbatches", "vpp", "schedule", "ranks",
                                            "makespan", "bubble_fraction"}));
  EXPECT_EQ(j["schedule"], "interleaved");
  EXPECT_EQ(j["vpp"], 2);
  EXPECT_EQ(j["makespan"], 27.0);  // (vpp m + pp - 1)(f + b) = 9 * 3
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (const auto& rank : j["ranks"]) {
    EXPECT_TRUE(rank["rank"].is_number_integer());
    EXPECT_TRUE(rank["warmup"].is_number_integer());
    EXPECT_TRUE(rank["peak_inflight"].is_number_integer());
    int computes = 0;
    for (const auto& op : rank["ops"]) {
      const std::string kind = op["op"];
      const bool p2p = kind.find('-') != std::string::npos;
      EXPECT_TRUE(kind == "F" || kind == "B" || kind == "send-forward" || kind == "recv-forward" ||
                  kind == "send-backward" || kind == "recv-backward")
          << kind;
      EXPECT_EQ(op.contains("peer"), p2p);
      EXPECT_EQ(op.size(), p2p ? 6u : 5u);
      EXPECT_LE(op["start"].get<double>(), op["end"].get<double>());
      computes += !p2p;
    }
    EXPECT_EQ(computes, 16);  // 2 passes x 4 micro-batches x 2 chunks
  }
  EXPECT_EQ(j["ranks"][0]["warmup"], 4);
}

TEST(ShowScheduleCli, ZeroBubbleCosts) {
  // Without --weight-cost, zb-h1 splits the backward in halves: F 1, B 1, W 1.
  const Result r = run("--pp 4 --microbatches 8 --schedule zb-h1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cost per pass: F 1, B 1, W 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("makespan 27, bubble fraction 11.11 %"), std::string::npos) << r.out;
  const Result w =
      run("--pp 4 --microbatches 8 --schedule zb-h1 --forward-cost 3 "
          "--backward-cost 2 --weight-cost 1");
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.out.find("makespan 60,"), std::string::npos) << w.out;  // 8 * 6 + 3 * 4
}

TEST(ShowScheduleCli, SvgFile) {
  const std::string path = temp_path("schedule.svg");
  std::remove(path.c_str());
  const Result r = run("--pp 4 --microbatches 8 --vpp 2 --svg " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string svg = slurp(path);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Parsed by a real XML parser where python3 is installed.
  if (std::system("python3 -c 'import xml.dom.minidom' >/dev/null 2>&1") == 0) {
    const std::string check =
        "python3 -c 'import sys, xml.dom.minidom; "
        "d = xml.dom.minidom.parse(sys.argv[1]); "
        "sys.exit(0 if d.documentElement.tagName == \"svg\" else 1)' " +
        path;
    EXPECT_EQ(std::system(check.c_str()), 0);
  }
}

TEST(ShowScheduleCli, ErrorsNameTheFlag) {
  struct Case {
    std::string args, err;
  };
  const Case cases[] = {
      {"--pp 1 --microbatches 4 --vpp 2",
       "mplan: error: --vpp: vpp (2) > 1 needs pp > 1 (Megatron: When interleaved schedule is "
       "used, pipeline-model-parallel size should be greater than 1)\n"},
      {"--pp 4 --microbatches 6 --vpp 2",
       "mplan: error: --microbatches: The remainder of M (the total micro-batches) divided by N "
       "(number of contiguous micro-batches in a virtual pipeline stage) should be 0, or larger "
       "than or equal to the pipeline-parallel size, but it is 2. Otherwise, it introduces "
       "dependency bubbles in the pipeline and reduces throughput.\n"},
      {"--pp 4 --microbatches 2 --vpp 2",
       "mplan: error: --microbatches: The number of contiguous micro-batches in a virtual "
       "pipeline stage should range in [PP=4 , M=2]\n"},
      {"--pp 4 --microbatches 8 --vpp 2 --group-size 3",
       "mplan: error: --group-size: The number of contiguous micro-batches in a virtual "
       "pipeline stage should range in [PP=4 , M=8]\n"},
      {"--pp 4 --microbatches 8 --vpp 2 --schedule zb-h1",
       "mplan: error: --vpp: vpp (2) > 1 needs the interleaved schedule (Megatron runs it "
       "whenever vpp > 1); zb-h1 has one model chunk per rank\n"},
      {"--pp 4 --microbatches 8 --schedule interleaved",
       "mplan: error: --vpp: the interleaved schedule needs vpp > 1 (with vpp 1 Megatron runs "
       "the non-interleaved 1F1B schedule)\n"},
      {"--pp 4 --microbatches 8 --schedule 2f2b",
       "mplan: error: --schedule: must be one of gpipe, 1f1b, interleaved, zb-h1; got "
       "\"2f2b\"\n"},
      {"--pp 4", "mplan: error: --microbatches: required (or --plan FILE)\n"},
      {"--microbatches 4", "mplan: error: --pp: required (or --plan FILE)\n"},
      {"--pp 0 --microbatches 4", "mplan: error: --pp: must be >= 1, got 0\n"},
      {"--pp 4 --microbatches 8 --forward-cost 1",
       "mplan: error: --backward-cost: required with --forward-cost\n"},
      {"--pp 4 --microbatches 8 --forward-cost 0 --backward-cost 1",
       "mplan: error: --forward-cost: must be a number > 0, got 0\n"},
      {"--pp 4 --microbatches 8 --weight-cost 1",
       "mplan: error: --weight-cost: needs --forward-cost and --backward-cost\n"},
      {"--pp 4 --microbatches 8 --width 10", "mplan: error: --width: must be >= 40, got 10\n"},
      {"--pp 4 --microbatches 8 --forward-cost 1e308 --backward-cost 1",
       "mplan: error: --forward-cost: must be <= 1e+06, got 1e+308\n"},
      {"--pp 4 --microbatches 8 --forward-cost 1 --backward-cost 1e-9",
       "mplan: error: --backward-cost: must be >= 0.001, got 1e-09\n"},
      {"--pp 2000 --microbatches 8", "mplan: error: --pp: must be <= 256, got 2000\n"},
      {"--pp 4 --microbatches 1000000",
       "mplan: error: --microbatches: must be <= 4096, got 1000000\n"},
      {"--pp 128 --microbatches 4096 --vpp 2",
       "mplan: error: --microbatches: pp 128 x vpp 2 x 4096 micro-batches is too large to draw "
       "(at most pp 256, vpp 64, 4096 micro-batches and 262144 passes of each kind)\n"},
      {"--pp 4 --microbatches 8 --svg /nonexistent-dir/x.svg",
       "mplan: error: --svg: cannot write '/nonexistent-dir/x.svg'\n"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_EQ(r.err, c.err) << c.args;
  }
  // A malformed number is CLI11's parse error, also exit 2.
  EXPECT_EQ(run("--pp four --microbatches 8").code, 2);
}

TEST(ShowScheduleCli, FromAPlan) {
  const std::string ok =
      write_temp("plan_ok.json",
                 R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
          "parallel": {"pp": 4, "vpp": 2, "dp": 1, "micro_batch_size": 1,
                       "global_batch_size": 8}})");
  const Result r = run("--plan " + ok + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pp"], 4);
  EXPECT_EQ(j["vpp"], 2);
  EXPECT_EQ(j["microbatches"], 8);
  EXPECT_EQ(j["schedule"], "interleaved");

  // pp x vpp > num_layers (24): every rule the plan breaks, on one line.
  const std::string deep =
      write_temp("plan_deep.json",
                 R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
          "parallel": {"pp": 4, "vpp": 8, "dp": 1, "micro_batch_size": 1,
                       "global_batch_size": 32}})");
  const Result d = run("--plan " + deep);
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.err.find("parallel.pp: pp x vpp (4 x 8 = 32) virtual pipeline stages exceed "
                       "num_layers (24): every stage needs at least one layer"),
            std::string::npos)
      << d.err;
  EXPECT_EQ(d.err.find('\n'), d.err.size() - 1) << d.err;

  const Result both = run("--plan " + ok + " --pp 2");
  EXPECT_EQ(both.code, 2);
  EXPECT_EQ(both.err,
            "mplan: error: --plan: the plan sets pp, vpp, micro-batches, schedule and group "
            "size; drop --pp\n");
}

TEST(ShowScheduleCli, HelpListsEveryOption) {
  const Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt :
       {"--pp", "--microbatches", "--vpp", "--schedule", "--group-size", "--forward-cost",
        "--backward-cost", "--weight-cost", "--json", "--svg", "--plan", "--width", "Examples:"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
