#pragma once
// Shared by the cli tests: a private temporary folder, files in it, real certificates made
// with the project's certs/ scripts (openssl), and environment variables set for one test.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace topogate::cli::testing {

inline std::string source_dir() {
  const char* env = std::getenv("TOPOGATE_SOURCE_DIR");
  return env && *env ? env : TOPOGATE_SOURCE_DIR;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text, mode_t mode = 0600) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  ::chmod(path.c_str(), mode);
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A temporary folder removed with its contents at the end of the test.
class temp_dir {
 public:
  temp_dir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/topogate-cli-test.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~temp_dir() { static_cast<void>(std::system(("rm -rf " + shell_quote(path_)).c_str())); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct run_result {
  int rc = -1;
  std::string out, err;
};

// Runs `binary args` with no kubeconfig, no cluster and HOME (without ~/.kube) `dir`, where
// its output is kept.
inline run_result run_without_cluster(const temp_dir& dir, const std::string& binary,
                                      const std::string& args) {
  const std::string cmd =
      "env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME=" + shell_quote(dir.path()) + " " +
      shell_quote(binary) + " " + args + " >" + shell_quote(dir / "out") + " 2>" +
      shell_quote(dir / "err") + " </dev/null";
  const int status = std::system(cmd.c_str());
  run_result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

// Sets (or unsets, with nullopt) an environment variable for the life of the object.
class scoped_env {
 public:
  scoped_env(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~scoped_env() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// DIR/ca.{crt,key}, DIR/NAME.{crt,key} client certificates signed by it (certs/ scripts).
inline bool make_ca(const std::string& dir) {
  const std::string cmd = "CERTS_QUIET=1 " + shell_quote(source_dir() + "/certs/make-ca.sh") +
                          " --out " + shell_quote(dir) + " --cn 'cli test CA' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}
inline bool make_client_cert(const std::string& dir, const std::string& name,
                             const std::string& cn) {
  const std::string cmd =
      "CERTS_QUIET=1 " + shell_quote(source_dir() + "/certs/make-client-cert.sh") + " --ca-cert " +
      shell_quote(dir + "/ca.crt") + " --ca-key " + shell_quote(dir + "/ca.key") + " --out " +
      shell_quote(dir) + " --name " + name + " --cn " + shell_quote(cn) + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

inline std::string base64(const std::string& data) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) |
                       (static_cast<unsigned char>(data[i + 1]) << 8) |
                       static_cast<unsigned char>(data[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (i + 1 == data.size()) {
    const unsigned v = static_cast<unsigned char>(data[i]) << 16;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    const unsigned v = (static_cast<unsigned char>(data[i]) << 16) |
                       (static_cast<unsigned char>(data[i + 1]) << 8);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

}  // namespace topogate::cli::testing
