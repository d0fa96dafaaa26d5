package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/redis/go-redis/v9"
)

// applyTLS adds --tls-ca and --tls-cert/--tls-key to the TLS settings a rediss:// URL gave opt
// (go-redis's: the server name from the URL, TLS 1.2 at least). Without --tls-ca the system's CA
// certificates are trusted (SSL_CERT_FILE and SSL_CERT_DIR change where they are read from).
// It fails with a usage error when the flags are given for a redis:// URL, when only one of
// --tls-cert and --tls-key is, and when a file cannot be read or holds no usable PEM.
func (o *options) applyTLS(opt *redis.Options) error {
	if o.tlsCA == "" && o.tlsCert == "" && o.tlsKey == "" {
		return nil
	}
	if opt.TLSConfig == nil {
		return usagef("--tls-ca, --tls-cert and --tls-key need a rediss:// URL; --redis-url %q does not use TLS",
			redactURL(o.redisURL))
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together: the client certificate and its private key")
	}
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return usagef("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usagef("--tls-ca %q holds no PEM certificate", o.tlsCA)
		}
		opt.TLSConfig.RootCAs = pool
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return usagef("--tls-cert %q and --tls-key %q: %v", o.tlsCert, o.tlsKey, err)
		}
		opt.TLSConfig.Certificates = []tls.Certificate{cert}
	}
	return nil
}
