// Tests of the pipeline layout parser against Megatron-LM's own examples (the docstring of
// parse_str_to_list, docs/user-guide/features/pipeline_parallel_layout.md, functional-test
// configs), its corner cases of re.sub unrolling, and the validation rules in Megatron's words.
#include "src/parallel/pipeline_layout.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

// Each stage as a string of its layer characters in the order E t m L (a stage's order does not
// matter to the counts).
std::vector<std::string> stages_of(const PipelineLayout& l) {
  std::vector<std::string> out;
  for (const LayoutStage& s : l.stages)
    out.push_back(std::string(static_cast<size_t>(s.embedding), 'E') +
                  std::string(static_cast<size_t>(s.decoder), 't') +
                  std::string(static_cast<size_t>(s.mtp), 'm') +
                  std::string(static_cast<size_t>(s.loss), 'L'));
  return out;
}

PipelineLayout parse(const std::string& s) { return parse_pipeline_layout(s, "layout"); }

TEST(PipelineLayout, MegatronsDocstringExample) {
  // "Ettt|(tt|)*29,m|L" -> [["E","t","t","t"]] + [["t","t"]]*29 + [["m"],["L"]]
  const PipelineLayout l = parse("Ettt|(tt|)*29,m|L");
  std::vector<std::string> want{"Ettt"};
  for (int i = 0; i < 29; ++i) want.push_back("tt");
  want.push_back("m");
  want.push_back("L");
  EXPECT_EQ(stages_of(l), want);
  EXPECT_EQ(l.num_stages(), 32);
  EXPECT_EQ(l.count(&LayoutStage::decoder), 61);
  EXPECT_EQ(l.text, "Ettt|(tt|)*29,m|L");
}

TEST(PipelineLayout, RepetitionsOfCharactersAndGroups) {
  EXPECT_EQ(stages_of(parse("Et*3|(tt|)*29,m|L")), stages_of(parse("Ettt|(tt|)*29,m|L")));
  // The docstring's unrolling examples: (ab)*3 -> ababab, ab,(cd|)*2 -> abcd|cd|.
  EXPECT_EQ(stages_of(parse("(tE)*3")), (std::vector<std::string>{"EEEttt"}));
  EXPECT_EQ(stages_of(parse("Et,(tt|)*2L")), (std::vector<std::string>{"Ettt", "tt", "L"}));
  EXPECT_EQ(stages_of(parse("(|t)*2,tL")), (std::vector<std::string>{"", "t", "ttL"}));
  EXPECT_EQ(stages_of(parse("t*12")).front(), std::string(12, 't'));
  EXPECT_EQ(stages_of(parse("Et*0|L")), (std::vector<std::string>{"E", "L"}));  // x * 0 = ""
  // Empty stages are allowed (the user guide's "E||t|L").
  EXPECT_EQ(stages_of(parse("E||t|L")), (std::vector<std::string>{"E", "", "t", "L"}));
  EXPECT_EQ(stages_of(parse("")), (std::vector<std::string>{""}));
}

TEST(PipelineLayout, UnrollingIsOnePassEachAsReSub) {
  // Groups first: "((t)*2)*3": the first group is "(t" (up to the first ')'), unrolled twice;
  // ")*3" then unrolls ')' three times, which is no layer character.
  EXPECT_THROW(parse("((t)*2)*3"), Error);
  // A group inside a group's count is not re-read: "(t*2|)*2" -> "t*2|t*2|" -> "tt|tt|".
  EXPECT_EQ(stages_of(parse("E(t*2|)*2L")), (std::vector<std::string>{"Ett", "tt", "L"}));
  // "t*2*3": the first match "t*2" consumes the digits, "*3" is left over.
  EXPECT_THROW(parse("Et*2*3L"), Error);
  EXPECT_THROW(parse("()*2"), Error);  // a group needs one character
}

TEST(PipelineLayout, BadCharactersNameTheField) {
  try {
    parse_pipeline_layout("Et x|L", "parallel.pipeline_model_parallel_layout");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("parallel.pipeline_model_parallel_layout: invalid layer "
                                          "character ' '",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_THROW(parse("ETL"), Error);  // upper-case T is not a layer
  EXPECT_THROW(parse("Et*99999999999999999999|L"), Error);
  EXPECT_THROW(parse("(t*1000|)*100000"), Error);  // beyond kMaxLayoutChars
}

TEST(PipelineLayout, DecoderOffsetsInFlattenedOrder) {
  const PipelineLayout l = parse("Et*3|(tt|)*6L");  // pp 2: 8 stages, vpp 4, 15 layers
  ASSERT_EQ(l.num_stages(), 8);
  EXPECT_EQ(l.decoder_before, (std::vector<int64_t>{0, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(l.stages.back().decoder, 0);
  EXPECT_EQ(l.stages.back().loss, 1);
}

TEST(PipelineLayout, MegatronsValidationRules) {
  const PipelineLayout ok = parse("Et*3|(tt|)*6L");
  EXPECT_FALSE(pipeline_layout_problem(ok, 2, 4, 15, 0));
  EXPECT_FALSE(pipeline_layout_problem(ok, 4, 2, 15, 0));
  EXPECT_NE(pipeline_layout_problem(ok, 3, 1, 15, 0)
                ->find("must be divisible by "
                       "pipeline_model_parallel_size"),
            std::string::npos);
  EXPECT_NE(pipeline_layout_problem(ok, 2, 2, 15, 0)->find("conflicts"), std::string::npos);
  EXPECT_EQ(*pipeline_layout_problem(ok, 2, 4, 16, 0),
            "Number of decoder layers 15 must match num_layers 16");
  EXPECT_EQ(*pipeline_layout_problem(parse("tE|L"), 2, 1, 1, 0),
            "The first layer must be embedding, but got 't'");
  EXPECT_EQ(*pipeline_layout_problem(parse("Et|Lt"), 2, 1, 2, 0),
            "The last layer must be loss, but got 't'");
  EXPECT_EQ(*pipeline_layout_problem(parse("Et|ELt|L"), 3, 1, 2, 0),
            "Embedding must be specified exactly once");
  EXPECT_EQ(*pipeline_layout_problem(parse("EtL|L"), 2, 1, 1, 0),
            "Loss must be specified exactly once");
  // MTP: the count, after every decoder layer, in the last virtual stage, all in one stage.
  const PipelineLayout mtp = parse("Et*3|(tt|)*29,m|L");
  EXPECT_FALSE(pipeline_layout_problem(mtp, 16, 2, 61, 1));
  EXPECT_NE(pipeline_layout_problem(mtp, 16, 2, 61, 0)->find("mtp"), std::string::npos);
  EXPECT_EQ(*pipeline_layout_problem(parse("Et|mt|L"), 3, 1, 2, 1),
            "decoder layers must be placed before MTP layers");
  EXPECT_NE(pipeline_layout_problem(parse("Et|tm||L"), 2, 2, 2, 1)->find("last virtual"),
            std::string::npos);
  EXPECT_EQ(*pipeline_layout_problem(parse("Et|t|m|mL"), 2, 2, 2, 2),
            "All of the MTP layers must be in the same one virtual pipeline stage");
}

TEST(PipelineLayout, FromCountsWritesACompactLayoutThatParsesBack) {
  const PipelineLayout l = layout_from_counts({7, 8, 8, 8, 8, 8, 8, 7});
  EXPECT_EQ(l.text, "Et*7|(t*8|)*6t*7L");
  EXPECT_EQ(stages_of(l), stages_of(parse("Et*7|t*8|t*8|t*8|t*8|t*8|t*8|t*7L")));
  EXPECT_FALSE(pipeline_layout_problem(l, 8, 1, 62, 0));
  EXPECT_EQ(layout_from_counts({0, 2, 2, 0}).text, "E|(t*2|)*2L");
  EXPECT_EQ(layout_from_counts({1}).text, "EtL");
  EXPECT_EQ(layout_from_counts({1, 1, 1}).text, "Et|t|tL");
}

}  // namespace
}  // namespace mplan
