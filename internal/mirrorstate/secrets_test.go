package mirrorstate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The fixture key and values sealed with it by this code's first version.
// Opening them proves the key derivation (HKDF salt and info) and the format
// have not changed: if they did, every secret already stored in a
// __mirror_state would become unreadable.
const (
	fixtureSecretKey    = "fixture-secret-key-0123456789"
	fixtureSealedPass   = "enc:v1:NNUqsaCeob4d2Lz9dvLvLfZGaIO89WYGtjMTAM1EGKfz6OjWB3WB2mlAW34="
	fixturePlainPass    = "fixture-password"
	fixtureSealedKeyPEM = "enc:v1:Mnhtj6pdu/X+NCbUZXeDewXlv85SzS2lMLT6lCZ2qeWf9m6a5UWoBe5eFg0qv/Fo5DlyXEvoNv+mM+aMaAbyPL6yVXSiI4WAdD7k6TPyv2GV2gq5Kb2vQ00i"
	fixturePlainKeyPEM  = "-----BEGIN PRIVATE KEY-----\nfixture\n-----END PRIVATE KEY-----\n"
	otherSecretKey      = "another-secret-key-9876543210"
)

func mustTestSealer(t *testing.T, key string) *Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

func TestSecretSealOpenRoundTrip(t *testing.T) {
	s := mustTestSealer(t, fixtureSecretKey)
	for _, plain := range []string{"", "p", "pa$$wörd with spaces", strings.Repeat("x", 10000), "\x00\xff binary"} {
		sealed, err := s.Seal(plain)
		if err != nil {
			t.Fatalf("Seal(%q): %v", plain, err)
		}
		if !strings.HasPrefix(sealed, "enc:v1:") {
			t.Fatalf("sealed value %q lacks the enc:v1: prefix", sealed)
		}
		if len(plain) >= 8 && strings.Contains(sealed, plain) { // shorter strings can occur in base64 by chance
			t.Fatalf("sealed value contains the plain text")
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "enc:v1:"))
		if err != nil {
			t.Fatalf("sealed value is not standard base64: %v", err)
		}
		if want := 12 + len(plain) + 16; len(raw) != want {
			t.Fatalf("nonce|ciphertext is %d bytes, want %d (12-byte nonce, 16-byte tag)", len(raw), want)
		}
		got, err := s.Open(sealed)
		if err != nil || got != plain {
			t.Fatalf("Open(Seal(%q)) = %q, %v", plain, got, err)
		}
	}
}

func TestSecretNonceIsRandom(t *testing.T) {
	s := mustTestSealer(t, fixtureSecretKey)
	a, _ := s.Seal("same")
	b, _ := s.Seal("same")
	if a == b {
		t.Fatalf("two seals of the same value are equal (%q): the nonce is not random", a)
	}
}

func TestSecretFixturesOpen(t *testing.T) {
	s := mustTestSealer(t, fixtureSecretKey)
	for sealed, want := range map[string]string{fixtureSealedPass: fixturePlainPass, fixtureSealedKeyPEM: fixturePlainKeyPEM} {
		got, err := s.Open(sealed)
		if err != nil || got != want {
			t.Fatalf("Open(fixture) = %q, %v; want %q (key derivation or format changed?)", got, err, want)
		}
	}
}

func TestSecretWrongKey(t *testing.T) {
	other := mustTestSealer(t, otherSecretKey)
	_, err := other.Open(fixtureSealedPass)
	if !errors.Is(err, ErrSecretKeyMismatch) {
		t.Fatalf("Open with another key: err = %v, want ErrSecretKeyMismatch", err)
	}
	msg := err.Error()
	for _, want := range []string{"secret key does not match the one the secret was stored with", SecretKeyEnv} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, otherSecretKey) || strings.Contains(msg, fixtureSecretKey) {
		t.Fatalf("error %q contains a secret key", msg)
	}
}

func TestSecretKeyLength(t *testing.T) {
	_, err := NewSealer(strings.Repeat("k", MinSecretKeyLen-1))
	if err == nil {
		t.Fatal("NewSealer accepted a 15-byte key")
	}
	if !strings.Contains(err.Error(), SecretKeyEnv) || !strings.Contains(err.Error(), "16") {
		t.Fatalf("error %q should name %s and the minimum length", err, SecretKeyEnv)
	}
	if strings.Contains(err.Error(), strings.Repeat("k", MinSecretKeyLen-1)) {
		t.Fatalf("error %q echoes the key", err)
	}
	if _, err := NewSealer(""); err == nil {
		t.Fatal("NewSealer accepted an empty key")
	}
	if _, err := NewSealer(strings.Repeat("k", MinSecretKeyLen)); err != nil {
		t.Fatalf("NewSealer(16 bytes): %v", err)
	}
}

func TestSecretMalformed(t *testing.T) {
	s := mustTestSealer(t, fixtureSecretKey)
	tampered := []byte(fixtureSealedPass)
	tampered[len(tampered)-3] ^= 1 // a base64 letter within the tag
	for _, tc := range []struct {
		name, in, want string
		mismatch       bool
	}{
		{"plain text", "hunter2", "not a sealed secret", false},
		{"future format", "enc:v2:AAAA", "does not know", false},
		{"bad base64", "enc:v1:***", "base64", false},
		{"too short", "enc:v1:" + base64.StdEncoding.EncodeToString(make([]byte, 20)), "too short", false},
		{"tampered", string(tampered), "does not match", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Open(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) error = %v, want one saying %q", tc.in, err, tc.want)
			}
			if errors.Is(err, ErrSecretKeyMismatch) != tc.mismatch {
				t.Fatalf("Open(%q): errors.Is(ErrSecretKeyMismatch) = %v", tc.in, !tc.mismatch)
			}
		})
	}
}

func TestSecretNilSealer(t *testing.T) {
	var s *Sealer
	if _, err := s.Seal("x"); !errors.Is(err, ErrNoSecretKey) || !strings.Contains(err.Error(), SecretKeyEnv) {
		t.Fatalf("nil Seal: %v", err)
	}
	if _, err := s.Open(fixtureSealedPass); !errors.Is(err, ErrNoSecretKey) {
		t.Fatalf("nil Open: %v", err)
	}
}

// TestSecretNeverPrinted: neither the Sealer nor a record's settings print
// key material or secrets, whatever the verb, including nested in a
// MirrorRecord.
func TestSecretNeverPrinted(t *testing.T) {
	s := mustTestSealer(t, fixtureSecretKey)
	m := MirrorRecord{
		Name: "m",
		Source: SourceConnection{
			TLS:  &TLSSettings{ClientKeyPEM: fixturePlainKeyPEM, ServerName: "src"},
			SASL: &SASLSettings{Mechanism: "PLAIN", Username: "alice", Password: fixturePlainPass},
		},
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		for _, v := range []any{s, *s, m, &m, m.Source.TLS, *m.Source.SASL} {
			out := fmt.Sprintf(verb, v)
			for _, secret := range []string{fixturePlainPass, "fixture\n", "PRIVATE KEY", fixtureSecretKey} {
				if strings.Contains(out, secret) {
					t.Fatalf("fmt %s of %T printed a secret: %s", verb, v, out)
				}
			}
		}
	}
	if got := fmt.Sprint(s); got != "Sealer(redacted)" {
		t.Fatalf("Sealer prints %q", got)
	}
	if got := m.Source.SASL.String(); !strings.Contains(got, "alice") || !strings.Contains(got, "[redacted]") {
		t.Fatalf("SASL settings print %q; want the user name and [redacted]", got)
	}
}
