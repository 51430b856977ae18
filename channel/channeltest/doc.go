// Package channeltest runs local servers that speak the providers' contracts, for the
// tests of package channel and of packages built on it (delivery, the root end-to-end
// and crash tests): a real SMTP server (smtpcatch.Catcher, on emersion/go-smtp) whose
// replies can be scripted (an SMTP error at MAIL, RCPT or DATA, an answer held back, an
// AUTH requirement), a server that accepts connections and never answers, and a
// webhook receiver that verifies Standard Webhooks signatures with the reference
// library and answers scripted statuses; and an FCM HTTP v1 server with its OAuth2 token
// endpoint, an APNs HTTP/2 TLS server that verifies the provider token (ES256), and a
// Twilio Messages API server checking basic auth, each answering the provider's documented
// errors or holding its answer.
//
// Everything listens on 127.0.0.1 only.
package channeltest
