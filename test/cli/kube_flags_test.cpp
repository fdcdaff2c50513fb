// kubectl's connection flags and defaults (cli/kube_flags.hpp): as topogate and as kubectl's
// plugin, and what the flags ask kube::connect for.

#include "cli/kube_flags.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "test/fixtures/test_files.hpp"

namespace topogate::cli {
namespace {

using testing::scoped_env;
using testing::temp_dir;
using testing::write_text;

TEST(KubeFlagsTest, DefaultsAsTopogateAndAsKubectlPlugin) {
  temp_dir home;
  ASSERT_EQ(::mkdir((home / ".kube").c_str(), 0700), 0);
  write_text(home / ".kube/config", "current-context: x\n");
  scoped_env h("HOME", home.path());
  scoped_env k("KUBECONFIG", std::nullopt);
  scoped_env s("KUBERNETES_SERVICE_HOST", std::nullopt);

  // topogate: $KUBECONFIG or the Pod; ~/.kube/config is not read implicitly.
  set_kubectl_plugin(false);
  kube_flags a;
  EXPECT_TRUE(finish_kube_flags(a, false).has_value());
  {
    scoped_env kc("KUBECONFIG", "/a:/b");
    kube_flags b;
    EXPECT_FALSE(finish_kube_flags(b, false).has_value());
    EXPECT_EQ(b.kubeconfig, "/a:/b");
    EXPECT_FALSE(b.saw_kubeconfig);
    scoped_env pod("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    kube_flags c;
    EXPECT_FALSE(finish_kube_flags(c, false).has_value());
    EXPECT_TRUE(c.in_cluster);  // the Pod first
  }

  // kubectl's order: $KUBECONFIG, ~/.kube/config, the Pod.
  set_kubectl_plugin(true);
  EXPECT_EQ(program_name(), "kubectl topogate");
  {
    scoped_env pod("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    kube_flags d;
    EXPECT_FALSE(finish_kube_flags(d, false).has_value());
    EXPECT_EQ(d.kubeconfig, home / ".kube/config");
    EXPECT_FALSE(d.in_cluster);
    scoped_env kc("KUBECONFIG", "/a");
    kube_flags e;
    EXPECT_FALSE(finish_kube_flags(e, false).has_value());
    EXPECT_EQ(e.kubeconfig, "/a");
  }
  ASSERT_EQ(::unlink((home / ".kube/config").c_str()), 0);
  {
    kube_flags none;
    const auto err = finish_kube_flags(none, false);
    ASSERT_TRUE(err.has_value());
    EXPECT_NE(err->find("~/.kube/config"), std::string::npos);
    scoped_env pod("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    kube_flags pod_only;
    EXPECT_FALSE(finish_kube_flags(pod_only, false).has_value());
    EXPECT_TRUE(pod_only.in_cluster);
    kube_flags ctx;
    set_kube_flag(ctx, "--context", "x");
    const auto ctx_err = finish_kube_flags(ctx, false);
    ASSERT_TRUE(ctx_err.has_value());
    EXPECT_EQ(*ctx_err, "--context needs a kubeconfig");
  }
  set_kubectl_plugin(false);
  EXPECT_EQ(program_name(), "topogate");
}

TEST(KubeFlagsTest, ConnectOptionsAsTheFlagsSay) {
  kube_flags one;
  set_kube_flag(one, "--kubeconfig", "/k/config");
  set_kube_flag(one, "--context", "prod");
  auto o = connect_options(one);
  EXPECT_EQ(o.kubeconfigs, std::vector<std::string>{"/k/config"});
  EXPECT_TRUE(o.kubeconfigs_must_exist);
  EXPECT_EQ(o.context, "prod");

  // $KUBECONFIG: a list, whose missing files are skipped.
  kube_flags env;
  env.kubeconfig = "/a:/b::/c";
  o = connect_options(env);
  EXPECT_EQ(o.kubeconfigs, (std::vector<std::string>{"/a", "/b", "/c"}));
  EXPECT_FALSE(o.kubeconfigs_must_exist);

  kube_flags api;
  set_kube_flag(api, "--server", "https://10.0.0.1:6443");
  set_kube_flag(api, "--token-file", "/t");
  set_kube_flag(api, "--ca-file", "/ca");
  o = connect_options(api);
  EXPECT_TRUE(o.kubeconfigs.empty());
  EXPECT_EQ(o.access.server, "https://10.0.0.1:6443");
  EXPECT_EQ(o.access.token_file, "/t");
  EXPECT_EQ(o.access.ca_file, "/ca");

  kube_flags in_cluster;
  set_kube_flag(in_cluster, "--in-cluster", {});
  o = connect_options(in_cluster);
  EXPECT_TRUE(o.kubeconfigs.empty());
  EXPECT_EQ(o.access.server, "");
}

}  // namespace
}  // namespace topogate::cli
