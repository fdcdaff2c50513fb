// Kubeconfigs as clusters issue them (kube/kubeconfig.hpp): every field topogate reads,
// both sides of each check, $KUBECONFIG merging, and no credential in any message.
// Certificates are real (certs/ scripts, openssl).

#include "kube/kubeconfig.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/fixtures/test_files.hpp"

namespace topogate::kube {
namespace {

using testing::base64;
using testing::scoped_env;
using testing::slurp;
using testing::temp_dir;
using testing::write_text;

constexpr const char* secret_token = "tok-3f9c1d2e8b7a6f5e4d3c2b1a";

class KubeconfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new temp_dir();
    ASSERT_TRUE(testing::make_ca(pki_->path()));
    ASSERT_TRUE(testing::make_client_cert(pki_->path(), "alice", "alice"));
    ASSERT_TRUE(testing::make_client_cert(pki_->path(), "bob", "bob"));
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  static std::string pki(const std::string& name) { return *pki_ / name; }

  // A kubeconfig with one cluster "c", one user "u" and one context "ctx" (current).
  std::string write(const std::string& cluster, const std::string& user,
                    const std::string& context_extra = "", const std::string& name = "config") {
    const std::string text = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n" +
                             cluster + "users:\n- name: u\n  user:\n" + user +
                             "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n" +
                             context_extra + "current-context: ctx\n";
    const std::string path = dir_ / name;
    write_text(path, text);
    return path;
  }
  std::string ca_lines() const {
    return "    server: https://127.0.0.1:6443\n    certificate-authority: " + pki("ca.crt") + "\n";
  }
  core::result<kubeconfig_target> load(const std::string& path, const std::string& context = "") {
    return load_kubeconfig({path}, context);
  }

  temp_dir dir_;
  static temp_dir* pki_;
};
temp_dir* KubeconfigTest::pki_ = nullptr;

TEST_F(KubeconfigTest, TokenUserAndRelativePaths) {
  write_text(dir_ / "ca.crt", slurp(pki("ca.crt")));
  write_text(dir_ / "token", secret_token);
  const auto path =
      write("    server: https://api.example:6443\n    certificate-authority: ca.crt\n",
            "    tokenFile: token\n");
  auto t = load(path);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->context, "ctx");
  EXPECT_EQ(t->server, "https://api.example:6443");
  EXPECT_EQ(t->ca_file, dir_ / "ca.crt");
  EXPECT_EQ(t->token_file, dir_ / "token");
  EXPECT_TRUE(t->token.empty() && t->client_cert_file.empty() && t->client_cert_pem.empty() &&
              !t->exec);
  EXPECT_EQ(t->namespace_name, "");

  auto inline_token = load(write(ca_lines(), std::string("    token: ") + secret_token + "\n"));
  ASSERT_TRUE(inline_token) << inline_token.error().message;
  EXPECT_EQ(inline_token->token, secret_token);
}

TEST_F(KubeconfigTest, CertificateAuthorityFileOrDataExactlyOne) {
  const std::string ca = slurp(pki("ca.crt"));
  auto data = load(write(
      "    server: https://127.0.0.1:6443\n    certificate-authority-data: " + base64(ca) + "\n",
      "    token: x\n"));
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(data->ca_pem, ca);
  EXPECT_TRUE(data->ca_file.empty());

  auto both = load(
      write(ca_lines() + "    certificate-authority-data: " + base64(ca) + "\n", "    token: x\n"));
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().message.find("both certificate-authority and certificate-authority-data"),
            std::string::npos);

  auto none = load(write("    server: https://127.0.0.1:6443\n", "    token: x\n"));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("always verified"), std::string::npos);

  auto bad =
      load(write("    server: https://127.0.0.1:6443\n    certificate-authority-data: '@@@@'\n",
                 "    token: x\n"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not base64"), std::string::npos);

  auto no_server =
      load(write("    certificate-authority: " + pki("ca.crt") + "\n", "    token: x\n"));
  ASSERT_FALSE(no_server);
  EXPECT_NE(no_server.error().message.find("has no server"), std::string::npos);
}

TEST_F(KubeconfigTest, ClientCertificateFilesRelativeToTheKubeconfig) {
  write_text(dir_ / "alice.crt", slurp(pki("alice.crt")));
  write_text(dir_ / "alice.key", slurp(pki("alice.key")));
  auto t =
      load(write(ca_lines(), "    client-certificate: alice.crt\n    client-key: alice.key\n"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->client_cert_file, dir_ / "alice.crt");
  EXPECT_EQ(t->client_key_file, dir_ / "alice.key");
  EXPECT_TRUE(t->token.empty() && t->token_file.empty());
}

TEST_F(KubeconfigTest, ClientCertificateInlineData) {
  const std::string cert = slurp(pki("alice.crt")), key = slurp(pki("alice.key"));
  auto t = load(write(ca_lines(), "    client-certificate-data: " + base64(cert) +
                                      "\n    client-key-data: " + base64(key) + "\n"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->client_cert_pem, cert);
  EXPECT_EQ(t->client_key_pem, key);
  EXPECT_TRUE(t->client_cert_file.empty() && t->client_key_file.empty());

  // One as a file, the other inline: one pair, in memory.
  auto mixed = load(write(ca_lines(), "    client-certificate: " + pki("alice.crt") +
                                          "\n    client-key-data: " + base64(key) + "\n"));
  ASSERT_TRUE(mixed) << mixed.error().message;
  EXPECT_EQ(mixed->client_cert_pem, cert);
  EXPECT_EQ(mixed->client_key_pem, key);
  EXPECT_TRUE(mixed->client_cert_file.empty() && mixed->client_key_file.empty());
}

TEST_F(KubeconfigTest, CertificateAndKeyGoTogetherAndMustMatch) {
  const std::string key_b64 = base64(slurp(pki("bob.key")));
  auto cert_only = load(write(ca_lines(), "    client-certificate: " + pki("alice.crt") + "\n"));
  ASSERT_FALSE(cert_only);
  EXPECT_NE(cert_only.error().message.find("has a client certificate but no client-key"),
            std::string::npos);

  auto key_only = load(write(ca_lines(), "    client-key-data: " + key_b64 + "\n"));
  ASSERT_FALSE(key_only);
  EXPECT_NE(key_only.error().message.find("has a client key but no client-certificate"),
            std::string::npos);

  // Alice's certificate with Bob's key: refused, and the key is not in the message.
  auto mismatch = load(write(ca_lines(), "    client-certificate: " + pki("alice.crt") +
                                             "\n    client-key-data: " + key_b64 + "\n"));
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos)
      << mismatch.error().message;
  EXPECT_EQ(mismatch.error().message.find(key_b64.substr(0, 40)), std::string::npos);
  EXPECT_EQ(mismatch.error().message.find("PRIVATE KEY"), std::string::npos);

  auto not_pem =
      load(write(ca_lines(), "    client-certificate-data: " + base64("not a certificate") +
                                 "\n    client-key-data: " + key_b64 + "\n"));
  ASSERT_FALSE(not_pem);
  EXPECT_NE(not_pem.error().message.find("not a PEM certificate"), std::string::npos);

  auto both_forms = load(
      write(ca_lines(), "    client-certificate: " + pki("alice.crt") +
                            "\n    client-certificate-data: " + base64(slurp(pki("alice.crt"))) +
                            "\n    client-key: " + pki("alice.key") + "\n"));
  ASSERT_FALSE(both_forms);
  EXPECT_NE(both_forms.error().message.find("both client-certificate and client-certificate-data"),
            std::string::npos);

  auto missing =
      load(write(ca_lines(), "    client-certificate: absent.crt\n    client-key: absent.key\n"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(dir_ / "absent.crt"), std::string::npos)
      << missing.error().message;
}

TEST_F(KubeconfigTest, EncryptedKeyIsRefusedWithoutAPrompt) {
  const std::string enc = dir_ / "enc.key";
  ASSERT_EQ(std::system(("openssl pkey -in " + testing::shell_quote(pki("alice.key")) +
                         " -aes256 -passout pass:secret-pass -out " + testing::shell_quote(enc) +
                         " 2>/dev/null")
                            .c_str()),
            0);
  auto t = load(write(ca_lines(), "    client-certificate: " + pki("alice.crt") +
                                      "\n    client-key: " + enc + "\n"));
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("not an unencrypted PEM private key"), std::string::npos)
      << t.error().message;
}

TEST_F(KubeconfigTest, TokenAndCertificateTogether) {
  auto t = load(write(ca_lines(), std::string("    token: ") + secret_token +
                                      "\n    client-certificate: " + pki("alice.crt") +
                                      "\n    client-key: " + pki("alice.key") + "\n"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->token, secret_token);
  EXPECT_EQ(t->client_cert_file, pki("alice.crt"));
}

TEST_F(KubeconfigTest, RefusedClusterSettings) {
  auto insecure =
      load(write(ca_lines() + "    insecure-skip-tls-verify: true\n", "    token: x\n"));
  ASSERT_FALSE(insecure);
  EXPECT_NE(insecure.error().message.find("insecure-skip-tls-verify is not supported"),
            std::string::npos);
  auto secure = load(write(ca_lines() + "    insecure-skip-tls-verify: false\n", "    token: x\n"));
  EXPECT_TRUE(secure) << secure.error().message;

  auto proxy = load(write(ca_lines() + "    proxy-url: http://proxy:3128\n", "    token: x\n"));
  ASSERT_FALSE(proxy);
  EXPECT_NE(proxy.error().message.find("proxy-url is not supported"), std::string::npos);

  auto sni =
      load(write(ca_lines() + "    tls-server-name: kubernetes.default\n", "    token: x\n"));
  ASSERT_TRUE(sni) << sni.error().message;
  EXPECT_EQ(sni->tls_server_name, "kubernetes.default");
}

TEST_F(KubeconfigTest, RefusedUserSettings) {
  struct refused {
    std::string user, expect;
  };
  const std::vector<refused> cases = {
      {"    auth-provider:\n      name: oidc\n", "auth-provider is not supported"},
      {"    username: admin\n    password: hunter2\n", "basic authentication"},
      {"    token: x\n    as: someone\n", "impersonation (as)"},
      {"    token: x\n    as-groups: [system:masters]\n", "impersonation (as-groups)"},
      {std::string("    token: ") + secret_token +
           "\n    exec:\n      command: plugin\n      apiVersion: client.authentication.k8s.io/v1\n"
           "      interactiveMode: Never\n",
       "both a token and an exec plugin"},
  };
  for (const auto& c : cases) {
    auto t = load(write(ca_lines(), c.user));
    ASSERT_FALSE(t) << c.user;
    EXPECT_NE(t.error().message.find(c.expect), std::string::npos) << t.error().message;
    EXPECT_EQ(t.error().message.find(secret_token), std::string::npos);
    EXPECT_EQ(t.error().message.find("hunter2"), std::string::npos);
  }
  // Empty impersonation fields are what `kubectl config view` writes for none.
  auto empty_as = load(write(ca_lines(), "    token: x\n    as: ''\n    as-groups: []\n"));
  EXPECT_TRUE(empty_as) << empty_as.error().message;
}

TEST_F(KubeconfigTest, ContextsNamespacesAndNames) {
  const std::string text =
      "clusters:\n- name: c\n  cluster:\n" + ca_lines() +
      "users:\n- name: u\n  user:\n    token: x\n"
      "- name: ghost-ref\n  user:\n    token: y\n"
      "contexts:\n- name: a\n  context: {cluster: c, user: u, namespace: team-a}\n"
      "- name: b\n  context: {cluster: c, user: u}\n"
      "- name: anonymous\n  context: {cluster: c}\n"
      "- name: lost-cluster\n  context: {cluster: nowhere, user: u}\n"
      "- name: lost-user\n  context: {cluster: c, user: nobody}\n"
      "current-context: a\n";
  write_text(dir_ / "multi", text);
  auto a = load(dir_ / "multi");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->context, "a");
  EXPECT_EQ(a->namespace_name, "team-a");
  auto b = load(dir_ / "multi", "b");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->namespace_name, "");
  auto anon = load(dir_ / "multi", "anonymous");
  ASSERT_TRUE(anon) << anon.error().message;
  EXPECT_TRUE(anon->token.empty() && anon->token_file.empty());

  auto missing = load(dir_ / "multi", "zzz");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no context \"zzz\""), std::string::npos);
  auto lost_cluster = load(dir_ / "multi", "lost-cluster");
  ASSERT_FALSE(lost_cluster);
  EXPECT_NE(lost_cluster.error().message.find("cluster \"nowhere\", which is not defined"),
            std::string::npos);
  auto lost_user = load(dir_ / "multi", "lost-user");
  ASSERT_FALSE(lost_user);
  EXPECT_NE(lost_user.error().message.find("user \"nobody\", which is not defined"),
            std::string::npos);

  write_text(dir_ / "nocurrent", "clusters: []\ncontexts: []\n");
  auto none = load(dir_ / "nocurrent");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no current-context"), std::string::npos);
}

TEST_F(KubeconfigTest, UndecodableKubeconfigDoesNotQuoteIt) {
  write_text(dir_ / "broken", std::string("users:\n- name: u\n  user:\n    token: ") +
                                  secret_token + "\n    token: " + secret_token + "\n");
  auto t = load(dir_ / "broken");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find(dir_ / "broken"), std::string::npos);
  EXPECT_EQ(t.error().message.find(secret_token), std::string::npos) << t.error().message;
}

TEST_F(KubeconfigTest, KubeconfigListMergesAsKubectlDoes) {
  temp_dir other;
  write_text(other / "token", "from-second");
  write_text(dir_ / "first",
             "clusters:\n- name: c\n  cluster:\n" + ca_lines() +
                 "users:\n- name: u\n  user: {token: from-first}\n"
                 "contexts:\n- name: one\n  context: {cluster: c, user: u, namespace: first}\n");
  write_text(other / "second",
             "clusters:\n- name: c\n  cluster: {server: 'https://other:1'}\n"
             "users:\n- name: u\n  user: {token: ignored}\n- name: v\n  user: {tokenFile: token}\n"
             "contexts:\n- name: one\n  context: {cluster: c, user: v}\n- name: two\n  context: "
             "{cluster: c, user: v}\n"
             "current-context: two\n");
  // The first file to name an entry wins; the current-context comes from the file that has one;
  // a relative path is relative to the file that holds the entry; missing files are skipped.
  auto t = load_kubeconfig({dir_ / "absent", dir_ / "first", other / "second"}, "", false);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->context, "two");
  EXPECT_EQ(t->server, "https://127.0.0.1:6443");
  EXPECT_EQ(t->token_file, other / "token");
  auto one = load_kubeconfig({dir_ / "first", other / "second"}, "one", false);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->token, "from-first");
  EXPECT_EQ(one->namespace_name, "first");

  auto strict = load_kubeconfig({dir_ / "absent"}, "", true);
  ASSERT_FALSE(strict);
  auto none = load_kubeconfig({dir_ / "absent", dir_ / "absent2"}, "", false);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no kubeconfig file exists"), std::string::npos);
}

TEST_F(KubeconfigTest, ExecPluginFields) {
  const std::string ext =
      "    extensions:\n    - name: client.authentication.k8s.io/exec\n      extension:\n        "
      "audience: api\n"
      "        retries: 3\n        strict: true\n";
  auto t = load(write(
      ca_lines() + "    tls-server-name: kubernetes\n" + ext,
      "    exec:\n      command: ./bin/get-token\n      args: [--region, eu-west-1]\n"
      "      env:\n      - {name: AWS_PROFILE, value: prod}\n      - {name: EMPTY, value: ''}\n"
      "      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n"
      "      installHint: install get-token\n      provideClusterInfo: true\n"));
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(t->exec);
  const exec_config& e = *t->exec;
  EXPECT_EQ(e.command, "./bin/get-token");
  EXPECT_EQ(e.base_dir, dir_.path());
  EXPECT_EQ(e.args, (std::vector<std::string>{"--region", "eu-west-1"}));
  ASSERT_EQ(e.env.size(), 2u);
  EXPECT_EQ(e.env[0], (std::pair<std::string, std::string>{"AWS_PROFILE", "prod"}));
  EXPECT_EQ(e.env[1], (std::pair<std::string, std::string>{"EMPTY", ""}));
  EXPECT_EQ(e.api_version, "client.authentication.k8s.io/v1");
  EXPECT_EQ(e.interactive, interactive_mode::never);
  EXPECT_EQ(e.install_hint, "install get-token");
  EXPECT_TRUE(e.provide_cluster_info);
  const std::string want_cluster =
      "{\"server\":\"https://127.0.0.1:6443\",\"tls-server-name\":\"kubernetes\","
      "\"certificate-authority-data\":\"" +
      base64(slurp(pki("ca.crt"))) +
      "\",\"config\":{\"audience\":\"api\",\"retries\":3,\"strict\":true}}";
  EXPECT_EQ(e.cluster_json, want_cluster);

  // Without provideClusterInfo the cluster is not described.
  auto plain = load(write(ca_lines(),
                          "    exec:\n      command: get-token\n"
                          "      apiVersion: client.authentication.k8s.io/v1beta1\n"));
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_TRUE(plain->exec->cluster_json.empty());
  EXPECT_EQ(plain->exec->interactive, interactive_mode::if_available);  // v1beta1's default
  EXPECT_FALSE(plain->exec->provide_cluster_info);
}

TEST_F(KubeconfigTest, ExecPluginChecks) {
  struct bad {
    std::string exec, expect;
  };
  const std::string v1 = "      apiVersion: client.authentication.k8s.io/v1\n";
  const std::vector<bad> cases = {
      {v1 + "      interactiveMode: Never\n", "exec.command is required"},
      {"      command: p\n      interactiveMode: Never\n", "exec.apiVersion is required"},
      {"      command: p\n      apiVersion: client.authentication.k8s.io/v1alpha1\n",
       "apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported"},
      {"      command: p\n" + v1,
       "interactiveMode is required for client.authentication.k8s.io/v1"},
      {"      command: p\n" + v1 + "      interactiveMode: Sometimes\n",
       "interactiveMode \"Sometimes\" is not Never, IfAvailable or Always"},
      {"      command: p\n" + v1 + "      interactiveMode: Never\n      env:\n      - {value: x}\n",
       "exec.env[0].name is required"},
      {"      command: p\n" + v1 + "      interactiveMode: Never\n      env:\n      - {name: A}\n",
       "exec.env[0].value is required"},
      {"      command: p\n" + v1 +
           "      interactiveMode: Never\n      env:\n      - {name: A=B, value: x}\n",
       "exec.env[0].name is not a variable name"},
      {"      command: p\n" + v1 + "      interactiveMode: Never\n      args: word\n",
       "exec.args is not a list"},
      {"      command: p\n" + v1 +
           "      interactiveMode: Never\n      provideClusterInfo: maybe\n",
       "provideClusterInfo is not true or false"},
  };
  for (const auto& c : cases) {
    auto t = load(write(ca_lines(), "    exec:\n" + c.exec));
    ASSERT_FALSE(t) << c.exec;
    EXPECT_NE(t.error().message.find(c.expect), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().message.find("user \"u\""), std::string::npos) << t.error().message;
  }
  for (const char* mode : {"Never", "IfAvailable", "Always"}) {
    auto t = load(write(ca_lines(), "    exec:\n      command: p\n" + v1 +
                                        "      interactiveMode: " + mode + "\n"));
    ASSERT_TRUE(t) << t.error().message;
  }
}

TEST_F(KubeconfigTest, ConnectUsesOnlyWhatTheKubeconfigSays) {
  auto cert_only = write(ca_lines() + "    tls-server-name: kubernetes\n",
                         "    client-certificate: " + pki("alice.crt") +
                             "\n    client-key: " + pki("alice.key") + "\n",
                         "    namespace: team-b\n");
  connect_options f;
  f.kubeconfigs = {cert_only};
  connection conn;
  ASSERT_TRUE(connect(f, conn));
  ASSERT_TRUE(conn.api);
  const auto& ep = conn.api->where();
  EXPECT_EQ(ep.host, "127.0.0.1");
  EXPECT_EQ(ep.port, "6443");
  EXPECT_EQ(ep.token_file, "");  // never the ServiceAccount token
  EXPECT_EQ(ep.ca_file, pki("ca.crt"));
  EXPECT_EQ(ep.client_cert_file, pki("alice.crt"));
  EXPECT_EQ(ep.tls_server_name, "kubernetes");
  EXPECT_FALSE(ep.credentials);
  EXPECT_EQ(conn.context, "ctx");
  EXPECT_EQ(conn.default_namespace, "team-b");

  auto with_exec =
      write(ca_lines(),
            "    exec:\n      command: p\n      apiVersion: client.authentication.k8s.io/v1\n"
            "      interactiveMode: Never\n",
            "", "exec-config");
  connect_options g;
  g.kubeconfigs = {with_exec};
  connection conn2;
  ASSERT_TRUE(connect(g, conn2));
  EXPECT_TRUE(conn2.api->where().credentials);
  ASSERT_TRUE(conn2.exec);
  EXPECT_EQ(conn2.exec->runs(), 0);  // the plugin runs at the first request, not before
}

}  // namespace
}  // namespace topogate::kube
