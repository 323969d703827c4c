// Package kip is the vocabulary of KIP-1279 that every part of kafkamirror shares: the
// partition and desired states, the legal desired-state changes and the command for each,
// mirror.name values, the name rules, the error codes and the defaults. It is the one home
// of these rules: the provider, the API contract, the worker and the engine import it (the
// provider still never imports the engine). It imports only the standard library.
package kip
