#include "common/pki.h"

#include <arpa/inet.h>

#include <memory>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl::pki {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Request = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;
using Extension =
    std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreCtx =
    std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using Bignum = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;

// The first queued OpenSSL error, for messages ("" when there is none).
std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return absl::StrCat(" (", text, ")");
}

absl::Status Failed(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, OpenSslError()));
}

Bio ReadBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? size_t(n) : 0);
}

absl::StatusOr<Key> ParseKey(const std::string& pem) {
  Bio bio = ReadBio(pem);
  // A passphrase callback that gives none: an encrypted key is refused
  // instead of OpenSSL prompting on the terminal.
  Key key(PEM_read_bio_PrivateKey(
      bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PEM private key", OpenSslError()));
  }
  return key;
}

absl::StatusOr<Cert> ParseCert(const std::string& pem) {
  Bio bio = ReadBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PEM certificate", OpenSslError()));
  }
  return cert;
}

absl::StatusOr<Request> ParseRequest(const std::string& pem) {
  Bio bio = ReadBio(pem);
  Request req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PEM certificate request", OpenSslError()));
  }
  return req;
}

std::string CommonNameOf(X509_NAME* name) {
  int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) return "";
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                     size_t(ASN1_STRING_length(data)));
}

absl::Status SetCommonName(X509_NAME* name, const std::string& common_name) {
  if (common_name.empty() || common_name.size() > 64) {
    return absl::InvalidArgumentError(
        "a certificate name must have 1 to 64 characters");
  }
  if (X509_NAME_add_entry_by_txt(
          name, "CN", MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(common_name.data()),
          static_cast<int>(common_name.size()), -1, 0) != 1) {
    return Failed("cannot set the certificate name");
  }
  return absl::OkStatus();
}

bool IsIpAddress(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid,
                          const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return Failed(absl::StrCat("cannot add the certificate extension ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteCert(X509* cert) {
  Bio out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(out.get(), cert) != 1) {
    return Failed("cannot write the certificate");
  }
  return BioText(out.get());
}

// Builds and signs a certificate for `subject_key`; `issuer` null means
// self-signed.
absl::StatusOr<std::string> Sign(EVP_PKEY* subject_key, X509* issuer,
                                 EVP_PKEY* issuer_key,
                                 const CertificateOrder& order) {
  if (order.valid_days <= 0 || order.valid_days > 36500) {
    return absl::InvalidArgumentError("valid_days must be in [1, 36500]");
  }
  Cert cert(X509_new());
  if (!cert) return Failed("cannot allocate a certificate");
  X509_set_version(cert.get(), 2);
  Bignum serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Failed("cannot draw a serial number");
  }
  // An hour of slack for clocks that differ between machines.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), order.valid_days * 86400);
  if (absl::Status s = SetCommonName(X509_get_subject_name(cert.get()),
                                     order.common_name);
      !s.ok()) {
    return s;
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  X509_set_pubkey(cert.get(), subject_key);
  std::vector<std::pair<int, std::string>> extensions;
  switch (order.usage) {
    case Usage::kCertificateAuthority:
      extensions = {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                    {NID_key_usage, "critical,keyCertSign,cRLSign"}};
      break;
    case Usage::kServer: {
      std::vector<std::string> sans;
      for (const std::string& name : order.alt_names) {
        sans.push_back(absl::StrCat(IsIpAddress(name) ? "IP:" : "DNS:", name));
      }
      extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                    {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                    {NID_ext_key_usage, "serverAuth"}};
      if (!sans.empty()) {
        extensions.push_back({NID_subject_alt_name, absl::StrJoin(sans, ",")});
      }
      break;
    }
    case Usage::kClient:
      extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                    {NID_key_usage, "critical,digitalSignature"},
                    {NID_ext_key_usage, "clientAuth"}};
      break;
  }
  extensions.push_back({NID_subject_key_identifier, "hash"});
  if (issuer != nullptr) {
    extensions.push_back({NID_authority_key_identifier, "keyid:always"});
  }
  for (const auto& [nid, value] : extensions) {
    if (absl::Status s = AddExtension(cert.get(), signer, nid, value); !s.ok()) {
      return s;
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return Failed("cannot sign the certificate");
  }
  return WriteCert(cert.get());
}

}  // namespace

absl::StatusOr<std::string> NewPrivateKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Failed("cannot generate an EC P-256 key");
  Bio out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0,
                               nullptr, nullptr) != 1) {
    return Failed("cannot write the private key");
  }
  return BioText(out.get());
}

absl::StatusOr<std::string> NewCertificateRequest(
    const std::string& key_pem, const std::string& common_name) {
  absl::StatusOr<Key> key = ParseKey(key_pem);
  if (!key.ok()) return key.status();
  Request req(X509_REQ_new());
  X509_REQ_set_version(req.get(), 0);
  if (absl::Status s = SetCommonName(X509_REQ_get_subject_name(req.get()),
                                     common_name);
      !s.ok()) {
    return s;
  }
  if (X509_REQ_set_pubkey(req.get(), key->get()) != 1 ||
      X509_REQ_sign(req.get(), key->get(), EVP_sha256()) == 0) {
    return Failed("cannot sign the certificate request");
  }
  Bio out(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509_REQ(out.get(), req.get()) != 1) {
    return Failed("cannot write the certificate request");
  }
  return BioText(out.get());
}

absl::StatusOr<std::string> RequestCommonName(const std::string& csr_pem) {
  absl::StatusOr<Request> req = ParseRequest(csr_pem);
  if (!req.ok()) return req.status();
  EVP_PKEY* key = X509_REQ_get0_pubkey(req->get());
  if (key == nullptr || X509_REQ_verify(req->get(), key) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the certificate request's signature does not match its key");
  }
  return CommonNameOf(X509_REQ_get_subject_name(req->get()));
}

absl::StatusOr<std::string> RequestKeyFingerprint(const std::string& csr_pem) {
  absl::StatusOr<Request> req = ParseRequest(csr_pem);
  if (!req.ok()) return req.status();
  EVP_PKEY* key = X509_REQ_get0_pubkey(req->get());
  unsigned char* der = nullptr;
  const int n = key != nullptr ? i2d_PUBKEY(key, &der) : -1;
  if (n <= 0) return Failed("cannot encode the request's public key");
  std::string digest = Sha256Hex(absl::string_view(reinterpret_cast<char*>(der), size_t(n)));
  OPENSSL_free(der);
  return digest;
}

absl::StatusOr<std::string> SelfSignedCa(const std::string& key_pem,
                                         const std::string& common_name,
                                         int64_t valid_days) {
  absl::StatusOr<Key> key = ParseKey(key_pem);
  if (!key.ok()) return key.status();
  CertificateOrder order;
  order.common_name = common_name;
  order.usage = Usage::kCertificateAuthority;
  order.valid_days = valid_days;
  return Sign(key->get(), nullptr, key->get(), order);
}

absl::StatusOr<std::string> IssueCertificate(const std::string& ca_cert_pem,
                                             const std::string& ca_key_pem,
                                             const std::string& subject_pem,
                                             const CertificateOrder& order) {
  absl::StatusOr<Cert> ca = ParseCert(ca_cert_pem);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<Key> ca_key = ParseKey(ca_key_pem);
  if (!ca_key.ok()) return ca_key.status();
  Key subject_key;
  if (subject_pem.find("CERTIFICATE REQUEST") != std::string::npos) {
    absl::StatusOr<std::string> name = RequestCommonName(subject_pem);
    if (!name.ok()) return name.status();
    absl::StatusOr<Request> req = ParseRequest(subject_pem);
    if (!req.ok()) return req.status();
    subject_key.reset(X509_REQ_get_pubkey(req->get()));
  } else {
    absl::StatusOr<Key> key = ParseKey(subject_pem);
    if (!key.ok()) return key.status();
    subject_key = *std::move(key);
  }
  if (!subject_key) return Failed("the subject has no public key");
  return Sign(subject_key.get(), ca->get(), ca_key->get(), order);
}

absl::StatusOr<CertificateInfo> ReadCertificate(const std::string& cert_pem) {
  absl::StatusOr<Cert> cert = ParseCert(cert_pem);
  if (!cert.ok()) return cert.status();
  CertificateInfo info;
  info.common_name = CommonNameOf(X509_get_subject_name(cert->get()));
  struct tm when;
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &when) == 1) {
    info.not_after_unix = timegm(&when);
  }
  return info;
}

absl::Status VerifyIssuedBy(const std::string& cert_pem,
                            const std::string& ca_cert_pem) {
  absl::StatusOr<Cert> cert = ParseCert(cert_pem);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<Cert> ca = ParseCert(ca_cert_pem);
  if (!ca.ok()) return ca.status();
  Store store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca->get());
  StoreCtx ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert->get(), nullptr);
  if (X509_verify_cert(ctx.get()) != 1) {
    std::string why = X509_verify_cert_error_string(
        X509_STORE_CTX_get_error(ctx.get()));
    ERR_clear_error();
    return absl::FailedPreconditionError(
        absl::StrCat("the certificate does not verify against the CA: ", why));
  }
  return absl::OkStatus();
}

absl::Status VerifyKeyMatches(const std::string& cert_pem,
                              const std::string& key_pem) {
  absl::StatusOr<Cert> cert = ParseCert(cert_pem);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<Key> key = ParseKey(key_pem);
  if (!key.ok()) return key.status();
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::FailedPreconditionError(
        "the private key does not belong to the certificate");
  }
  return absl::OkStatus();
}

std::string RandomToken(absl::string_view prefix) {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // The OS random source is gone: no token is better than a guessable one.
    std::abort();
  }
  return absl::StrCat(
      prefix, absl::BytesToHexString(absl::string_view(
                  reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), n));
}

std::string HmacSha256Hex(absl::string_view key, absl::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  size_t n = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(),
                key.size(), reinterpret_cast<const unsigned char*>(data.data()),
                data.size(), mac, sizeof(mac), &n) == nullptr) {
    std::abort();  // only fails when OpenSSL itself is broken
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(mac), n));
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace trainctl::pki
