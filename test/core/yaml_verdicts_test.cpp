// topogate's decoder against yaml.v3's verdicts in test/fixtures/yaml_v3_verdicts.json,
// which conformance/internal/consumer/yaml_verdicts_test.go checks against yaml.v3 itself:
// texts where yaml-cpp (the YAML parser underneath) and yaml.v3 (the consumer's) disagree
// unless topogate's layer makes up the difference.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdlib>
#include <string>

#include "core/document.hpp"

namespace topogate::core {
namespace {

TEST(YamlV3Verdicts, TheDecoderAcceptsExactlyWhatYamlV3Accepts) {
  const char* root = std::getenv("TOPOGATE_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "TOPOGATE_SOURCE_DIR is set by CTest";
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(std::string(root) + "/test/fixtures/yaml_v3_verdicts.json").get(doc),
            simdjson::SUCCESS);
  simdjson::dom::array cases;
  ASSERT_EQ(doc["cases"].get(cases), simdjson::SUCCESS);
  std::size_t n = 0, accepted = 0;
  for (simdjson::dom::element c : cases) {
    std::string_view text;
    bool want = false;
    ASSERT_EQ(c["yaml"].get(text), simdjson::SUCCESS);
    ASSERT_EQ(c["accepted"].get(want), simdjson::SUCCESS);
    const decode_result r = decode_any(text);
    EXPECT_EQ(r.ok(), want) << "text: \"" << std::string(text) << "\"\n" << render_text(r.errors);
    ++n;
    accepted += want ? 1 : 0;
  }
  EXPECT_GE(n, 50u);
  EXPECT_GE(accepted, 20u);  // both sides of the line
  EXPECT_GE(n - accepted, 20u);
}

}  // namespace
}  // namespace topogate::core
