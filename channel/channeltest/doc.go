// Package channeltest runs local servers that speak each provider's documented contract,
// errors included, for the tests of package channel's adapters and of packages built on
// it (delivery, the root end-to-end and crash tests) and for the bench: a real SMTP
// server (emersion/go-smtp) whose replies can be scripted (an SMTP error at MAIL, RCPT or
// DATA, an answer held back, an AUTH requirement), a server that accepts connections and
// never answers, a webhook receiver that verifies Standard Webhooks signatures with the
// reference library and answers scripted statuses, FCM HTTP v1 with its OAuth2 token
// endpoint (fcm.go), APNs over TLS HTTP/2 with token auth (apns.go) and Twilio's Messages
// API (twilio.go). Each server records what it received, answers scripted errors in order,
// can hang (for timeouts), and closes when the test ends.
//
// Everything listens on 127.0.0.1 only.
package channeltest
