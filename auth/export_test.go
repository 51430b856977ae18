package auth

// Test helpers for the external tests of the package (auth_test), which run the gateway
// through internal/testgw (an import cycle from package auth itself).
var (
	TestKeys      = testKeys
	NewJWKSServer = newJWKSServer
	RSAJWK        = rsaJWK
	ECJWK         = ecJWK
	SignKid       = signKid
	ClaimsNow     = claimsNow
)
