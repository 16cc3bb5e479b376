#include "self_signed_cert.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace trainctl::testing {

PemFiles WriteSelfSigned(const std::string& dir, const std::string& name) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"),
                                                          EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  EXPECT_NE(key, nullptr);
  X509_set_version(cert.get(), 2);  // v3
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(
      subject, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>("trainctl test"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  // CA:TRUE lets a client trust it as its own root (verifying clients).
  for (const auto& [nid, value] :
       std::vector<std::pair<int, const char*>>{
           {NID_basic_constraints, "critical,CA:TRUE"},
           {NID_subject_alt_name, "IP:127.0.0.1"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    EXPECT_NE(ext, nullptr);
    X509_add_ext(cert.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  EXPECT_GT(X509_sign(cert.get(), key.get(), EVP_sha256()), 0);
  PemFiles files{dir + "/" + name + ".crt", dir + "/" + name + ".key"};
  BIO* out = BIO_new_file(files.cert.c_str(), "w");
  EXPECT_EQ(PEM_write_bio_X509(out, cert.get()), 1);
  BIO_free(out);
  out = BIO_new_file(files.key.c_str(), "w");
  EXPECT_EQ(PEM_write_bio_PrivateKey(out, key.get(), nullptr, nullptr, 0,
                                     nullptr, nullptr),
            1);
  BIO_free(out);
  return files;
}

}  // namespace trainctl::testing
