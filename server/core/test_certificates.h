// SPDX-License-Identifier: Apache-2.0
// Certificates for TLS tests, made with the openssl command: a CA, a server certificate for
// 127.0.0.1 / localhost and a client certificate, both signed by the CA.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::server::testing {

struct TestCertificates {
  std::filesystem::path ca, server_cert, server_key, client_cert, client_key;
};

// Writes them into `dir` (created); false when openssl failed.
inline bool make_test_certificates(const std::filesystem::path& dir, TestCertificates* out) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::string d = dir.string();
  std::ofstream(dir / "san.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  const std::string quiet = " >/dev/null 2>&1";
  const std::string commands[] = {
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=kiln-test-ca -keyout " + d +
          "/ca.key -out " + d + "/ca.pem",
      "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout " + d + "/server.key -out " +
          d + "/server.csr",
      "openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.pem -CAkey " + d +
          "/ca.key -CAcreateserial -days 2 -extfile " + d + "/san.ext -out " + d + "/server.pem",
      "openssl req -newkey rsa:2048 -nodes -subj /CN=kiln-test-client -keyout " + d +
          "/client.key -out " + d + "/client.csr",
      "openssl x509 -req -in " + d + "/client.csr -CA " + d + "/ca.pem -CAkey " + d +
          "/ca.key -CAcreateserial -days 2 -out " + d + "/client.pem",
  };
  for (const std::string& c : commands) {
    if (std::system((c + quiet).c_str()) != 0) return false;
  }
  *out = {dir / "ca.pem", dir / "server.pem", dir / "server.key", dir / "client.pem",
          dir / "client.key"};
  return true;
}

}  // namespace kiln::server::testing
