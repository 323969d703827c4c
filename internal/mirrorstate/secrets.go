package mirrorstate

// Secret fields of a mirror (the source SASL password and TLS client key) are
// stored in __mirror_state, a topic anyone with READ on the destination can
// consume. They are therefore sealed with AES-256-GCM under a key derived from
// the worker's secret key (KAFKAMIRROR_SECRET_KEY) and are never written in
// clear. GCM authenticates as well as encrypts, so a wrong key is detected on
// Open instead of yielding garbage credentials.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SecretKeyEnv names the worker setting that holds the secret key. Errors
// name it so an operator knows what to set.
const SecretKeyEnv = "KAFKAMIRROR_SECRET_KEY"

// MinSecretKeyLen is the shortest secret key NewSealer accepts, in bytes.
const MinSecretKeyLen = 16

// sealedPrefix marks a sealed value and its format version, so a later
// format (another cipher, a key id) can be told apart from this one.
const sealedPrefix = "enc:v1:"

// The HKDF salt and info are fixed: changing either changes the derived key
// and makes every stored secret unreadable. They name the project and the
// purpose so the same secret key used elsewhere yields an unrelated AES key.
const (
	sealerSalt = "kafkamirror secret-key salt v1"
	sealerInfo = "kafkamirror __mirror_state secret fields AES-256-GCM v1"
)

// ErrNoSecretKey is wrapped by the errors returned when a secret must be
// sealed or opened and no secret key is configured.
var ErrNoSecretKey = errors.New("no secret key configured: set " + SecretKeyEnv + " to encrypt stored source credentials")

// ErrSecretKeyMismatch is wrapped by Open's error when the secret was sealed
// under another key (or the stored value was altered).
var ErrSecretKeyMismatch = errors.New("the secret key does not match the one the secret was stored with")

// Sealer encrypts secret fields (SASL password, TLS client key) with
// AES-256-GCM under a key derived with HKDF-SHA256 from the worker's secret
// key. It is safe for concurrent use. The nil *Sealer is valid: it seals and
// opens nothing and returns errors wrapping ErrNoSecretKey.
//
// A Sealer never prints its key: every fmt verb yields "Sealer(redacted)".
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer derives the sealing key from secretKey, which must be at least
// MinSecretKeyLen bytes long. Callers treat an empty secret key as "no
// sealer" (a nil *Sealer) rather than calling NewSealer.
func NewSealer(secretKey string) (*Sealer, error) {
	if len(secretKey) < MinSecretKeyLen {
		// The key itself is never echoed, only its length.
		return nil, fmt.Errorf("secret key (%s) is %d bytes long; at least %d are needed", SecretKeyEnv, len(secretKey), MinSecretKeyLen)
	}
	key, err := hkdf.Key(sha256.New, []byte(secretKey), []byte(sealerSalt), sealerInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the sealing key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealing cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("sealing cipher: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain and returns "enc:v1:" followed by the standard base64
// of nonce|ciphertext. The 96-bit nonce is random, so sealing the same value
// twice gives different strings (an observer cannot tell that two mirrors
// share a password).
func (s *Sealer) Seal(plain string) (string, error) {
	if s == nil {
		return "", ErrNoSecretKey
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return "", fmt.Errorf("sealing a secret: reading a random nonce: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(plain), nil)
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts a value made by Seal. A value sealed under another secret key
// gives an error wrapping ErrSecretKeyMismatch; a value that is not in the
// sealed format gives another error (it is not a wrong key, it is a bug or
// tampering).
func (s *Sealer) Open(sealed string) (string, error) {
	if s == nil {
		return "", ErrNoSecretKey
	}
	data, err := decodeSealed(sealed)
	if err != nil {
		return "", err
	}
	ns := s.aead.NonceSize()
	if len(data) < ns+s.aead.Overhead() {
		return "", fmt.Errorf("sealed secret is %d bytes, too short for a nonce and a tag", len(data))
	}
	plain, err := s.aead.Open(nil, data[:ns], data[ns:], nil)
	if err != nil {
		// GCM cannot tell a wrong key from altered bytes; a wrong key is
		// by far the likelier cause, so say that first.
		return "", fmt.Errorf("%w (%s changed since the secret was stored, or the stored value is corrupt)", ErrSecretKeyMismatch, SecretKeyEnv)
	}
	return string(plain), nil
}

// isSealed reports whether v has the sealed-value prefix of some version.
// Loading uses it to refuse secrets stored in clear.
func isSealed(v string) bool { return strings.HasPrefix(v, "enc:") }

func decodeSealed(sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		if isSealed(sealed) {
			v, _, _ := strings.Cut(strings.TrimPrefix(sealed, "enc:"), ":")
			return nil, fmt.Errorf("sealed secret has format %q, which this kafkamirror does not know (it knows v1): upgrade the worker", v)
		}
		return nil, errors.New("value is not a sealed secret (no \"" + sealedPrefix + "\" prefix)")
	}
	data, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("sealed secret is not valid base64: %w", err)
	}
	return data, nil
}

const redactedSealer = "Sealer(redacted)"

// The printing methods have value receivers so that a Sealer and a *Sealer
// both print redacted (fmt prints a nil *Sealer as "<nil>").

// String returns "Sealer(redacted)", never key material.
func (Sealer) String() string { return redactedSealer }

// GoString returns "Sealer(redacted)" for %#v.
func (Sealer) GoString() string { return redactedSealer }

// Format prints "Sealer(redacted)" for every verb, so not even %d or %x can
// dump the cipher's key schedule.
func (Sealer) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redactedSealer) }
