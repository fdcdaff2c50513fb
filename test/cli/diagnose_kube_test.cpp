// The notes of the dry run's lists (cli/diagnose_kube.hpp's list_notes): every note as given,
// the first field errors named and the rest counted.
#include "cli/diagnose_kube.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace topogate::cli {
namespace {

core::error_list field_errors(std::size_t n) {
  core::error_list out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(
        core::invalid("", "items[" + std::to_string(i) + "].spec", "x", "not a quantity"));
  return out;
}

TEST(ListNotes, NotesAsGivenFieldErrorsNamedUpToTheLimit) {
  list_notes n;
  n.note("the API serves no cohorts");
  n.warn(field_errors(list_notes::max_field_errors));
  auto got = n.take();
  ASSERT_EQ(got.size(), 1 + list_notes::max_field_errors);
  EXPECT_EQ(got[0], "the API serves no cohorts");
  EXPECT_NE(got[1].find("items[0].spec"), std::string::npos) << got[1];
  EXPECT_NE(got.back().find("items[7].spec"), std::string::npos) << got.back();
  EXPECT_TRUE(n.take().empty());  // taken: none left
}

TEST(ListNotes, FieldErrorsBeyondTheLimitCountedInOneNote) {
  list_notes n;
  n.warn(field_errors(3));
  n.warn(field_errors(list_notes::max_field_errors));  // 11 in all, over two pages
  const auto got = n.take();
  ASSERT_EQ(got.size(), list_notes::max_field_errors + 1);
  EXPECT_EQ(got.back(), "3 more listed fields are not read (the first 8 are named)");
}

}  // namespace
}  // namespace topogate::cli
