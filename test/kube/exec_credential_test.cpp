// Exec credential plugins (kube/exec_credential.hpp): the ExecCredential a plugin prints, and
// the runner against real plugins (small shell scripts written here): success, args and env,
// KUBERNETES_EXEC_INFO, interactiveMode with and without a terminal (a real pseudo-terminal),
// non-zero exit, garbage, timeout, huge output, a missing command; the credential cache.
// No message may carry what the plugin printed.

#include "kube/exec_credential.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/document.hpp"
#include "core/field_error.hpp"
#include "test/fixtures/test_files.hpp"
#include "test/timing.hpp"

namespace topogate::kube {
namespace {

using testing::scoped_env;
using testing::slurp;
using testing::temp_dir;
using testing::write_text;
using namespace std::chrono_literals;

constexpr const char* secret = "exec-secret-9b8a7c6d5e4f3a2b1c0d";

std::string credential_json(const std::string& status,
                            const std::string& api = std::string(exec_api_v1)) {
  return "{\"kind\":\"ExecCredential\",\"apiVersion\":\"" + api + "\",\"status\":" + status + "}";
}

exec_config v1_config(const std::string& command = "plugin") {
  exec_config c;
  c.command = command;
  c.api_version = std::string(exec_api_v1);
  c.interactive = interactive_mode::never;
  return c;
}

class ExecTest : public ::testing::Test {
 protected:
  // DIR/NAME: an executable shell script with `body`.
  std::string script(const std::string& name, const std::string& body) {
    const std::string path = dir_ / name;
    write_text(path, "#!/bin/sh\n" + body, 0700);
    return path;
  }
  exec_config config_for(const std::string& path) {
    exec_config c = v1_config(path);
    c.base_dir = dir_.path();
    return c;
  }
  static exec_run_options quick(bool terminal = false) {
    exec_run_options o;
    o.timeout = 10s;
    o.stdin_is_terminal = terminal;
    return o;
  }
  temp_dir dir_;
};

TEST(ExecCredentialParse, TokenCertificateAndExpiry) {
  const exec_config cfg = v1_config();
  auto tok =
      parse_exec_credential(credential_json(std::string("{\"token\":\"") + secret + "\"}"), cfg);
  ASSERT_TRUE(tok) << tok.error().message;
  EXPECT_EQ(tok->token, secret);
  EXPECT_FALSE(tok->expires);

  auto exp = parse_exec_credential(
      credential_json("{\"token\":\"t\",\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}"), cfg);
  ASSERT_TRUE(exp) << exp.error().message;
  ASSERT_TRUE(exp->expires);
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*exp->expires), 1893553445);

  exec_config beta = cfg;
  beta.api_version = std::string(exec_api_v1beta1);
  EXPECT_TRUE(parse_exec_credential(
      credential_json("{\"token\":\"t\"}", std::string(exec_api_v1beta1)), beta));
}

TEST(ExecCredentialParse, ClientCertificatePairIsChecked) {
  temp_dir pki;
  ASSERT_TRUE(testing::make_ca(pki.path()));
  ASSERT_TRUE(testing::make_client_cert(pki.path(), "a", "a"));
  ASSERT_TRUE(testing::make_client_cert(pki.path(), "b", "b"));
  std::string cert, key, other_key;
  core::append_json_string(cert, slurp(pki / "a.crt"));
  core::append_json_string(key, slurp(pki / "a.key"));
  core::append_json_string(other_key, slurp(pki / "b.key"));
  const exec_config cfg = v1_config();
  auto ok = parse_exec_credential(
      credential_json("{\"clientCertificateData\":" + cert + ",\"clientKeyData\":" + key + "}"),
      cfg);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->client_cert_pem, slurp(pki / "a.crt"));
  EXPECT_TRUE(ok->token.empty());

  auto both =
      parse_exec_credential(credential_json("{\"token\":\"t\",\"clientCertificateData\":" + cert +
                                            ",\"clientKeyData\":" + key + "}"),
                            cfg);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->token, "t");

  auto mismatch = parse_exec_credential(credential_json("{\"clientCertificateData\":" + cert +
                                                        ",\"clientKeyData\":" + other_key + "}"),
                                        cfg);
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos)
      << mismatch.error().message;
  EXPECT_EQ(mismatch.error().message.find("PRIVATE KEY"), std::string::npos);

  auto cert_only =
      parse_exec_credential(credential_json("{\"clientCertificateData\":" + cert + "}"), cfg);
  ASSERT_FALSE(cert_only);
  EXPECT_NE(cert_only.error().message.find("without its clientKeyData"), std::string::npos);
  auto key_only = parse_exec_credential(credential_json("{\"clientKeyData\":" + key + "}"), cfg);
  ASSERT_FALSE(key_only);
  EXPECT_NE(key_only.error().message.find("without its clientCertificateData"), std::string::npos);
}

TEST(ExecCredentialParse, RefusedOutputNeverQuoted) {
  const exec_config cfg = v1_config("my-plugin");
  const std::string s = secret;
  struct bad {
    std::string output, expect;
  };
  const std::vector<bad> cases = {
      {"", "its output is not a JSON object"},
      {s, "its output is not a JSON object"},
      {"token=" + s + "\n", "its output is not a JSON object"},
      {"[\"" + s + "\"]", "its output is not a JSON object"},
      {"{\"kind\":\"" + s + "\",\"apiVersion\":\"client.authentication.k8s.io/v1\"}",
       "kind is not ExecCredential"},
      {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" + s + "\",\"status\":{\"token\":\"" + s +
           "\"}}",
       "apiVersion is not client.authentication.k8s.io/v1"},
      {credential_json("{\"token\":\"x\"}", std::string(exec_api_v1beta1)),
       "apiVersion is not client.authentication.k8s.io/v1"},
      {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\"}",
       "without a status"},
      {credential_json("{}"), "neither a token nor clientCertificateData"},
      {credential_json("{\"token\":\"\"}"), "neither a token nor clientCertificateData"},
      {credential_json("{\"token\":{\"v\":\"" + s + "\"}}"), "status.token is not a string"},
      {credential_json("{\"token\":\"" + s + "\",\"expirationTimestamp\":\"" + s + "\"}"),
       "expirationTimestamp that is not an RFC 3339 time"},
      {credential_json("{\"token\":\"" + s + "\",\"expirationTimestamp\":\"2030-01-02 03:04:05\"}"),
       "expirationTimestamp that is not an RFC 3339 time"},
      {credential_json("{\"token\":\"" + s + "\"") + " trailing",
       "its output is not a JSON object"},
  };
  for (const auto& c : cases) {
    auto r = parse_exec_credential(c.output, cfg);
    ASSERT_FALSE(r) << c.output;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("exec plugin \"my-plugin\""), std::string::npos)
        << r.error().message;
    EXPECT_EQ(r.error().message.find(secret), std::string::npos) << r.error().message;
  }
}

TEST(ExecInfo, InteractiveAndClusterInfo) {
  exec_config c = v1_config();
  c.cluster_json = "{\"server\":\"https://api:6443\"}";
  EXPECT_EQ(exec_info_json(c, false),
            "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
            "\"spec\":{\"interactive\":false}}");
  c.provide_cluster_info = true;
  EXPECT_EQ(exec_info_json(c, true),
            "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
            "\"spec\":{\"cluster\":{\"server\":\"https://api:6443\"},\"interactive\":true}}");
}

TEST_F(ExecTest, SuccessWithArgsEnvAndExecInfo) {
  const std::string out = dir_ / "seen";
  const std::string path = script(
      "plugin", "printf '%s\\n' \"$0\" \"$@\" > " + out +
                    "\n"
                    "printf '%s\\n' \"$FROM_KUBECONFIG\" \"$OVERRIDDEN\" \"$INHERITED\" >> " +
                    out +
                    "\n"
                    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > " +
                    out +
                    ".info\n"
                    "readlink /proc/self/fd/0 > " +
                    out +
                    ".stdin\n"
                    "echo 'plugin talking on stderr' >&2\n"
                    "printf '%s' '" +
                    credential_json(std::string("{\"token\":\"") + secret + "\"}") + "'\n");
  scoped_env inherited("INHERITED", "from-parent");
  scoped_env overridden("OVERRIDDEN", "from-parent");
  exec_config c = config_for(path);
  c.args = {"get-token", "--cluster", "a b"};
  c.env = {{"FROM_KUBECONFIG", "yes"}, {"OVERRIDDEN", "by-kubeconfig"}};
  c.provide_cluster_info = true;
  c.cluster_json = "{\"server\":\"https://api:6443\"}";
  auto r = run_exec_plugin(c, quick());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(r->find(secret), std::string::npos);
  EXPECT_EQ(slurp(out), path + "\nget-token\n--cluster\na b\nyes\nby-kubeconfig\nfrom-parent\n");
  const auto info = core::decode_json(slurp(out + ".info"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info.root.find("kind")->text, "ExecCredential");
  EXPECT_EQ(info.root.find("apiVersion")->text, "client.authentication.k8s.io/v1");
  EXPECT_EQ(info.root.find("spec")->find("interactive")->text, "false");
  EXPECT_EQ(info.root.find("spec")->find("cluster")->find("server")->text, "https://api:6443");
  EXPECT_EQ(slurp(out + ".stdin"), "/dev/null\n");  // interactiveMode Never
  auto cred = parse_exec_credential(*r, c);
  ASSERT_TRUE(cred) << cred.error().message;
  EXPECT_EQ(cred->token, secret);
}

TEST_F(ExecTest, CommandLookup) {
  ASSERT_EQ(::mkdir((dir_ / "bin").c_str(), 0700), 0);
  write_text(dir_ / "bin/found-on-path",
             "#!/bin/sh\necho '" + credential_json("{\"token\":\"p\"}") + "'\n", 0700);
  scoped_env path("PATH", "/nonexistent:" + (dir_ / "bin") + ":/usr/bin:/bin");
  exec_config bare = config_for("found-on-path");
  auto on_path = run_exec_plugin(bare, quick());
  ASSERT_TRUE(on_path) << on_path.error().message;

  exec_config relative = config_for("./bin/found-on-path");  // relative to the kubeconfig's folder
  EXPECT_TRUE(run_exec_plugin(relative, quick()));

  exec_config missing = config_for("no-such-credential-plugin");
  missing.install_hint = "Install it with: apt install no-such-credential-plugin";
  auto r = run_exec_plugin(missing, quick());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exec plugin \"no-such-credential-plugin\" not found"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("Install it with: apt install"), std::string::npos);
  EXPECT_TRUE(r.failed_with(core::errc::not_found));

  write_text(dir_ / "bin/not-executable", "#!/bin/sh\necho hi\n", 0600);
  auto noexec = run_exec_plugin(config_for("./bin/not-executable"), quick());
  ASSERT_FALSE(noexec);
  EXPECT_NE(noexec.error().message.find("no executable file " + (dir_ / "./bin/not-executable")),
            std::string::npos)
      << noexec.error().message;
}

TEST_F(ExecTest, NonZeroExitAndSignalsNeverShowTheOutput) {
  auto exit3 = run_exec_plugin(
      config_for(script("fails", std::string("echo ") + secret + "\nexit 3\n")), quick());
  ASSERT_FALSE(exit3);
  EXPECT_NE(exit3.error().message.find("exited with status 3"), std::string::npos)
      << exit3.error().message;
  EXPECT_EQ(exit3.error().message.find(secret), std::string::npos);

  auto killed = run_exec_plugin(config_for(script("killed", "kill -TERM $$\n")), quick());
  ASSERT_FALSE(killed);
  EXPECT_NE(killed.error().message.find("killed by signal 15"), std::string::npos)
      << killed.error().message;

  auto garbage = run_exec_plugin(
      config_for(script("garbage", std::string("echo 'token: ") + secret + "'\n")), quick());
  ASSERT_TRUE(garbage);  // it ran; what it printed is refused by the parser
  auto parsed = parse_exec_credential(*garbage, config_for("garbage"));
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().message.find(secret), std::string::npos);
}

bool process_gone(pid_t pid) {
  // Gone, or a zombie nobody has reaped yet (its parent was killed too).
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

TEST_F(ExecTest, TimeoutKillsThePluginAndWhatItStarted) {
  const std::string pidfile = dir_ / "child.pid";
  exec_run_options o = quick();
  o.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_exec_plugin(
      config_for(script("slow", "sleep 30 &\necho $! > " + pidfile + "\nwait\n")), o);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("did not finish within 0.3s (killed)"), std::string::npos)
      << r.error().message;
  // At the 300 ms timeout, with the margin of test/timing.hpp; not when the plugin ends.
  EXPECT_LT(took, 300ms + test_timing::scheduling_margin);
  EXPECT_GE(took, 300ms);
  const pid_t child = static_cast<pid_t>(std::stol(slurp(pidfile)));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!process_gone(child) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(process_gone(child));

  // A plugin that closes stdout but keeps running is also held to the deadline.
  auto lingering = run_exec_plugin(config_for(script("lingers", "exec >&-\nsleep 30\n")), o);
  ASSERT_FALSE(lingering);
  EXPECT_NE(lingering.error().message.find("did not finish"), std::string::npos);

  // Within the deadline: fine.
  o.timeout = 5s;
  EXPECT_TRUE(run_exec_plugin(config_for(script("prompt", "sleep 0.2\necho '{}'\n")), o));
}

TEST_F(ExecTest, OutputLimitBothSides) {
  exec_run_options o = quick();
  o.max_output = 4096;
  auto at_limit =
      run_exec_plugin(config_for(script("exact", "head -c 4096 /dev/zero | tr '\\0' a\n")), o);
  ASSERT_TRUE(at_limit) << at_limit.error().message;
  EXPECT_EQ(at_limit->size(), 4096u);
  auto over =
      run_exec_plugin(config_for(script("over", "head -c 4097 /dev/zero | tr '\\0' a\n")), o);
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("printed more than 4096 bytes"), std::string::npos)
      << over.error().message;
  // An endless writer is stopped at the limit, not at the deadline.
  o.timeout = 30s;
  const auto t0 = std::chrono::steady_clock::now();
  auto endless = run_exec_plugin(config_for(script("endless", "yes\n")), o);
  ASSERT_FALSE(endless);
  EXPECT_TRUE(endless.failed_with(core::errc::too_large));
  // Not at the 30 s deadline: well before half of it.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, o.timeout / 2);
}

// Runs `fn` with our stdin replaced by the slave side of a real pseudo-terminal.
template <class F>
void with_terminal_stdin(F fn) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  const int saved = ::dup(0);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(slave, 0), 0);
  fn();
  ::dup2(saved, 0);
  ::close(saved);
  ::close(slave);
  ::close(master);
}

TEST_F(ExecTest, InteractiveModeRules) {
  const std::string seen = dir_ / "seen";
  const std::string path =
      script("interactive", "if [ -t 0 ]; then echo tty; else echo no-tty; fi > " + seen +
                                "\n"
                                "printf '%s' \"$KUBERNETES_EXEC_INFO\" > " +
                                seen +
                                ".info\n"
                                "echo '{}'\n");
  const auto interactive_flag = [&] {
    const auto d = core::decode_json(slurp(seen + ".info"));
    return d.ok() ? d.root.find("spec")->find("interactive")->text : std::string("?");
  };
  struct row {
    interactive_mode mode;
    bool terminal;
    bool ok;
    const char* stdin_seen;
    const char* interactive;
  };
  const std::vector<row> rows = {
      {interactive_mode::never, false, true, "no-tty\n", "false"},
      {interactive_mode::never, true, true, "no-tty\n", "false"},
      {interactive_mode::if_available, false, true, "no-tty\n", "false"},
      {interactive_mode::if_available, true, true, "tty\n", "true"},
      {interactive_mode::always, false, false, "", ""},
      {interactive_mode::always, true, true, "tty\n", "true"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(static_cast<int>(r.mode) * 10 + (r.terminal ? 1 : 0));
    ::unlink(seen.c_str());
    exec_config c = config_for(path);
    c.interactive = r.mode;
    core::result<std::string> out = std::string();
    if (r.terminal) {
      with_terminal_stdin([&] { out = run_exec_plugin(c, default_exec_run_options()); });
    } else {
      const int saved = ::dup(0);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
      out = run_exec_plugin(c, default_exec_run_options());  // isatty(0) is false here
      ::dup2(saved, 0);
      ::close(saved);
      ::close(null);
    }
    ASSERT_EQ(out.ok(), r.ok) << (out ? std::string() : out.error().message);
    if (!r.ok) {
      EXPECT_NE(out.error().message.find("needs a terminal (interactiveMode Always)"),
                std::string::npos);
      EXPECT_TRUE(slurp(seen).empty());  // not run
      continue;
    }
    EXPECT_EQ(slurp(seen), r.stdin_seen);
    EXPECT_EQ(interactive_flag(), r.interactive);
  }
}

TEST_F(ExecTest, CredentialCacheExpiryAndRefresh) {
  // Each run prints the next token from a counter; the first credential is already expired.
  const std::string count = dir_ / "count";
  const std::string path = script(
      "counting",
      "n=$(cat " + count + " 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + count +
          "\n"
          "if [ $n = 1 ]; then exp=2000-01-01T00:00:00Z; else exp=2100-01-01T00:00:00Z; fi\n"
          "printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
          "\"status\":{\"token\":\"token-%s\",\"expirationTimestamp\":\"%s\"}}' $n $exp\n");
  exec_credential_source source(config_for(path), quick());
  EXPECT_EQ(source.runs(), 0);
  auto first = source.get(false);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->token, "token-1");
  auto second = source.get(false);  // expired: runs again
  ASSERT_TRUE(second);
  EXPECT_EQ(second->token, "token-2");
  auto third = source.get(false);  // valid until 2100: cached
  ASSERT_TRUE(third);
  EXPECT_EQ(third->token, "token-2");
  EXPECT_EQ(source.runs(), 2);
  auto refreshed = source.get(true);  // the API said 401
  ASSERT_TRUE(refreshed);
  EXPECT_EQ(refreshed->token, "token-3");
  EXPECT_EQ(source.runs(), 3);

  // The clock decides expiry: one past 2100 makes the cached credential stale.
  exec_credential_source late(config_for(path), quick(),
                              [] { return std::chrono::system_clock::from_time_t(4200000000); });
  ASSERT_TRUE(late.get(false));
  ASSERT_TRUE(late.get(false));
  EXPECT_EQ(late.runs(), 2);

  // A failing plugin: the error, and nothing cached.
  exec_credential_source failing(config_for(script("nope", "exit 1\n")), quick());
  EXPECT_FALSE(failing.get(false));
  EXPECT_FALSE(failing.get(false));
  EXPECT_EQ(failing.runs(), 2);
}

}  // namespace
}  // namespace topogate::kube
