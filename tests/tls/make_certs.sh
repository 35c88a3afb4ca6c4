#!/usr/bin/env bash
# Writes the TLS fixtures beside this script: a test CA and the leaf certificates the TLS sandbox
# gateway serves (tests/tls_gateway.py). They are checked in, so the suite needs no openssl: the
# valid ones last a hundred years, and the expired and not-yet-valid ones have fixed windows in
# the past and the future, so no test ever needs a fake clock. Run again only to change them:
#
#     make tls-fixtures                   (needs openssl >= 1.1.1; `openssl ca` sets exact dates)
#
# Every certificate passes OpenSSL's X509_STRICT checks (Python 3.13 turns them on by default):
# EC P-256 keys, critical basicConstraints and keyUsage, subject and authority key identifiers.
# These keys are for tests only and protect nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

VALID_FROM=20200101000000Z
VALID_UNTIL=21260101000000Z  # a hundred years from when these were made
NAMES="DNS:localhost, DNS:relay.fairwins.test, IP:127.0.0.1, IP:::1"

cat > ca.cnf <<'EOF'
[ca]
default_ca = test_ca
[test_ca]
dir = .
database = $dir/index.txt
new_certs_dir = $dir
serial = $dir/serial
default_md = sha256
policy = any_name
unique_subject = no
copy_extensions = none
email_in_dn = no
[any_name]
commonName = supplied
organizationName = optional
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[leaf_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = ${ENV::SAN}
EOF
export SAN="$NAMES"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -pkeyopt ec_param_enc:named_curve -out "$1" 2>/dev/null; }

# sign NAME SUBJECT_CN ISSUER(ca|other|self) FROM UNTIL SAN
sign() {
  local name="$1" cn="$2" issuer="$3" from="$4" until="$5"
  export SAN="$6"
  openssl req -new -key leaf.key -subj "/O=FairWins tests/CN=$cn" -out "$name.csr" -config ca.cnf
  if [ "$issuer" = self ]; then
    openssl ca -batch -notext -config ca.cnf -selfsign -keyfile leaf.key -in "$name.csr" -out "$name.pem" \
      -startdate "$from" -enddate "$until" -extensions leaf_ext 2>/dev/null
  else
    openssl ca -batch -notext -config ca.cnf -cert "$issuer.pem" -keyfile "$issuer.key" -in "$name.csr" \
      -out "$name.pem" -startdate "$from" -enddate "$until" -extensions leaf_ext 2>/dev/null
  fi
}

# make_ca NAME CN
make_ca() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/O=FairWins tests/CN=$2" -out "$1.csr" -config ca.cnf
  openssl ca -batch -notext -config ca.cnf -selfsign -keyfile "$1.key" -in "$1.csr" -out "$1.pem" \
    -startdate "$VALID_FROM" -enddate "$VALID_UNTIL" -extensions ca_ext 2>/dev/null
}

touch index.txt
echo 1000 > serial
make_ca ca "FairWins test CA"
make_ca other "An unknown CA (a corporate proxy's, say)"
key leaf.key

sign gateway "relay.fairwins.test" ca "$VALID_FROM" "$VALID_UNTIL" "$NAMES"
sign wrong-host "elsewhere.fairwins.test" ca "$VALID_FROM" "$VALID_UNTIL" "DNS:elsewhere.fairwins.test"
sign expired "relay.fairwins.test" ca 20000101000000Z 20010101000000Z "$NAMES"
sign not-yet-valid "relay.fairwins.test" ca 21250101000000Z "$VALID_UNTIL" "$NAMES"
sign untrusted "relay.fairwins.test" other "$VALID_FROM" "$VALID_UNTIL" "$NAMES"
sign self-signed "relay.fairwins.test" self "$VALID_FROM" "$VALID_UNTIL" "$NAMES"

# A server sends its chain: the leaf, then the CA that issued it (the client must still trust it).
cat other.pem >> untrusted.pem
for name in ca gateway wrong-host expired not-yet-valid untrusted self-signed; do
  openssl x509 -in "$name.pem" -noout >/dev/null  # each one parses
done
cp ca.pem leaf.key gateway.pem wrong-host.pem expired.pem not-yet-valid.pem untrusted.pem self-signed.pem "$here/"
echo "wrote the TLS fixtures to $here"
