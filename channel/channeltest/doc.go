// Package channeltest runs local servers that speak each provider's documented contract,
// errors included, for tests of package channel's adapters and of the code that uses them:
// FCM HTTP v1 with its OAuth2 token endpoint (fcm.go), APNs over TLS HTTP/2 with token auth
// (apns.go), Twilio's Messages API (twilio.go), SMTP and webhook receivers. Each server
// records what it received, answers scripted errors in order, can hang (for timeouts), and
// closes when the test ends.
package channeltest
