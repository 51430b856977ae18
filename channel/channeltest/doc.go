// Package channeltest runs local servers that speak the providers' contracts, for the
// tests of package channel and of packages built on it (delivery, the root end-to-end
// and crash tests) and for the bench: a real SMTP server (emersion/go-smtp) whose
// replies can be scripted (an SMTP error at MAIL, RCPT or DATA, an answer held back, an
// AUTH requirement), a server that accepts connections and never answers, and a
// webhook receiver that verifies Standard Webhooks signatures with the reference
// library and answers scripted statuses.
//
// Everything listens on 127.0.0.1 only.
package channeltest
