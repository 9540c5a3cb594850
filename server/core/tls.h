// SPDX-License-Identifier: Apache-2.0
// TlsFiles: the PEM files a transport serves TLS with (kiln serve --tls-cert, --tls-key and, for
// mutual TLS, --tls-client-ca), read once at start.
#pragma once

#include <fmt/format.h>

#include <string>

#include "core/mapped_file.h"
#include "core/status.h"

namespace kiln::server {

struct TlsFiles {
  std::string cert_file;       // the server's certificate chain (PEM); empty: no TLS
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // when set, clients must present a certificate this CA signed

  bool enabled() const { return !cert_file.empty(); }
};

// The three files' contents, read; a missing or unreadable one names its flag.
struct TlsPem {
  std::string cert;
  std::string key;
  std::string client_ca;  // empty: no client certificates asked for
};

inline Result<TlsPem> read_tls_files(const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return invalid_argument_error("TLS needs both --tls-cert and --tls-key");
  }
  if (!files.client_ca_file.empty() && files.cert_file.empty()) {
    return invalid_argument_error("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key");
  }
  TlsPem pem;
  auto read = [](const std::string& path, const char* flag, std::string& out) -> Status {
    if (path.empty()) return Status();
    Result<std::string> text = read_file(path);
    if (!text.ok()) {
      return text.status().with_context(fmt::format("{} {}", flag, path));
    }
    out = std::move(text).value();
    return Status();
  };
  KILN_RETURN_IF_ERROR(read(files.cert_file, "--tls-cert", pem.cert));
  KILN_RETURN_IF_ERROR(read(files.key_file, "--tls-key", pem.key));
  KILN_RETURN_IF_ERROR(read(files.client_ca_file, "--tls-client-ca", pem.client_ca));
  return pem;
}

}  // namespace kiln::server
