#pragma once
// The runbook's scenarios under test/fixtures/diagnose, loaded as `topogate diagnose` loads
// `kubectl get ... -o json` output.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/diagnose.hpp"

namespace topogate::diagnose::testing {

namespace fs = std::filesystem;

inline fs::path fixtures() {
  const char* env = std::getenv("TOPOGATE_SOURCE_DIR");
  return fs::path(env && *env ? env : TOPOGATE_SOURCE_DIR) / "test" / "fixtures" / "diagnose";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void add_file(cluster_objects& c, const fs::path& p) {
  ASSERT_TRUE(fs::exists(p)) << p;
  const auto errors = add_objects(c, slurp(p), p.filename().string());
  EXPECT_TRUE(errors.empty()) << core::render_text(errors);
}

inline cluster_objects load(const std::string& dir) {
  cluster_objects c;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fixtures() / dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  EXPECT_FALSE(files.empty()) << dir;
  for (const auto& f : files) add_file(c, f);
  return c;
}

// Step n of a pending report (a failure, and the first step, when it has none).
inline const pending_step& step(const pending_report& r, int n) {
  for (const auto& s : r.steps)
    if (s.number == n) return s;
  ADD_FAILURE() << "no step " << n;
  return r.steps.front();
}

}  // namespace topogate::diagnose::testing
