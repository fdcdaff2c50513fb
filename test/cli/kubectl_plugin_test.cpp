// The real binary called as kubectl-topogate (the link `cmake --install` makes): kubectl's
// name in usage and messages, the same exit statuses as topogate, and kubectl's flag forms.
// The online part (kubectl itself, a real API) is test/e2e/kubeconfig.sh.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "test/fixtures/test_files.hpp"

namespace topogate::cli {
namespace {

using testing::shell_quote;
using testing::temp_dir;

using testing::run_result;

class KubectlPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = dir_ / "kubectl-topogate";
    ASSERT_EQ(::symlink(TOPOGATE_BINARY, plugin_.c_str()), 0);
  }
  // Runs `binary args` with no kubeconfig, no cluster and HOME without ~/.kube.
  run_result run(const std::string& binary, const std::string& args) {
    return testing::run_without_cluster(dir_, binary, args);
  }
  std::string fixtures() const {
    return testing::source_dir() + "/test/fixtures/diagnose/two-zones";
  }

  temp_dir dir_;
  std::string plugin_;
};

TEST_F(KubectlPluginTest, UsageNamesKubectlTopogate) {
  const auto help = run(plugin_, "-h");
  EXPECT_EQ(help.rc, 0);
  EXPECT_EQ(help.out.rfind("usage: kubectl topogate <command> [options]\n", 0), 0u) << help.out;
  const auto none = run(plugin_, "");
  EXPECT_EQ(none.rc, 2);
  EXPECT_EQ(none.err.rfind("usage: kubectl topogate <command>", 0), 0u) << none.err;
  const auto unknown = run(plugin_, "bogus");
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_EQ(unknown.err.rfind("kubectl topogate: unknown command \"bogus\"", 0), 0u) << unknown.err;
  const auto dhelp = run(plugin_, "diagnose --help");
  EXPECT_EQ(dhelp.rc, 0);
  EXPECT_NE(dhelp.out.find("  kubectl topogate diagnose pending WORKLOAD [-n NAMESPACE]"),
            std::string::npos);
  const auto bad = run(plugin_, "diagnose nonsense --from .");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err.rfind("kubectl topogate diagnose: unknown diagnosis \"nonsense\"", 0), 0u)
      << bad.err;

  // The same binary under its own name is unchanged.
  const auto plain = run(TOPOGATE_BINARY, "-h");
  EXPECT_EQ(plain.rc, 0);
  EXPECT_EQ(plain.out.rfind("usage: topogate <command> [options]\n", 0), 0u) << plain.out;
  const auto plain_bad = run(TOPOGATE_BINARY, "diagnose nonsense --from .");
  EXPECT_EQ(plain_bad.err.rfind("topogate diagnose: unknown diagnosis", 0), 0u) << plain_bad.err;
}

TEST_F(KubectlPluginTest, KubectlNamespaceFlagForms) {
  // Offline, so that only the flag parsing differs: every form finds default/zone-trio
  // (Pending: exit 1), and another namespace does not (exit 2).
  for (const char* ns :
       {"-n default", "-ndefault", "-n=default", "--namespace default", "--namespace=default"}) {
    const auto r = run(plugin_, "diagnose pending zone-trio " + std::string(ns) + " --from " +
                                    shell_quote(fixtures()));
    EXPECT_EQ(r.rc, 1) << ns << ": " << r.err;
  }
  const auto other =
      run(plugin_, "diagnose pending zone-trio -nother --from " + shell_quote(fixtures()));
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.err.find("Workload other/zone-trio not found"), std::string::npos) << other.err;
  const auto empty =
      run(plugin_, "diagnose pending zone-trio -n= --from " + shell_quote(fixtures()));
  EXPECT_EQ(empty.rc, 2);
  EXPECT_NE(empty.err.find("-n must not be empty"), std::string::npos) << empty.err;
}

TEST_F(KubectlPluginTest, NoKubeconfigAnywhereIsAUsageError) {
  const auto r = run(plugin_, "diagnose chain");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("~/.kube/config"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace topogate::cli
