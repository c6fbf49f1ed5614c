package store

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// GenerateSigningKey makes a new ed25519 key pair and returns both as PEM
// (PKCS #8 private key, PKIX public key): what `quiver keygen` writes.
func GenerateSigningKey() (privatePEM, publicPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pb, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pb}), nil
}

// ParseSigningKey reads an ed25519 private key: PEM ("PRIVATE KEY",
// PKCS #8), or the 32-byte seed in hex or base64.
func ParseSigningKey(b []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, errors.New("signing key: not an ed25519 key")
		}
		return priv, nil
	}
	seed, err := rawKey(string(b), ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParsePublicKey reads an ed25519 public key: PEM ("PUBLIC KEY", PKIX), or
// the 32 raw bytes in hex or base64.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, errors.New("public key: not an ed25519 key")
		}
		return pub, nil
	}
	raw, err := rawKey(string(b), ed25519.PublicKeySize)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return ed25519.PublicKey(raw), nil
}

func rawKey(s string, size int) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == size {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == size {
		return b, nil
	}
	return nil, fmt.Errorf("want PEM, or %d bytes in hex or base64", size)
}
