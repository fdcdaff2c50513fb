// The decoder's default document limit (core/document.hpp: decode_limits::max_bytes,
// 8 MiB) at its own value, for YAML and JSON: exactly 8 MiB decodes, one byte more is
// refused as too long.
#include <gtest/gtest.h>

#include <string>

#include "core/document.hpp"

namespace topogate::core {
namespace {

// {"a": "xxx…"} (valid as JSON and as YAML) of exactly `size` bytes.
std::string document_of(std::size_t size) {
  const std::string head = "{\"a\": \"", tail = "\"}";
  return head + std::string(size - head.size() - tail.size(), 'x') + tail;
}

TEST(DocumentDefaultLimit, EightMiBBothSides) {
  const decode_limits defaults;
  ASSERT_EQ(defaults.max_bytes, std::size_t{8} << 20);
  const auto at = document_of(defaults.max_bytes);
  const auto over = document_of(defaults.max_bytes + 1);
  ASSERT_EQ(at.size(), 8u << 20);

  const decode_result yaml_at = decode_yaml(at);
  EXPECT_TRUE(yaml_at.ok()) << (yaml_at.errors.empty() ? "" : yaml_at.errors[0].detail);
  const decode_result yaml_over = decode_yaml(over, "S1");
  ASSERT_FALSE(yaml_over.ok());
  EXPECT_EQ(yaml_over.errors[0].type, error_type::too_long);

  const decode_result json_at = decode_json(at);
  EXPECT_TRUE(json_at.ok()) << (json_at.errors.empty() ? "" : json_at.errors[0].detail);
  const decode_result json_over = decode_json(over, "S1");
  ASSERT_FALSE(json_over.ok());
  EXPECT_EQ(json_over.errors[0].type, error_type::too_long);
}

}  // namespace
}  // namespace topogate::core
