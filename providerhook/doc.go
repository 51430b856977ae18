// Package providerhook authenticates and parses the callbacks channel providers send to
// POST /v1/webhooks/provider/{name} (issue 11, item 6): Twilio's SMS status callbacks
// (NewTwilio) and SendGrid's event webhook (NewSendGrid). Each Hook checks the
// provider's documented signature with the provider's own library before it reads
// anything of the body, refuses a callback signed too long ago (a replay), and maps the
// provider's event names onto inbox.ProviderEvent (DELIVERED, FAILED, OPENED); events of
// other kinds, and events of mail or messages the gateway did not send (no delivery ref),
// are left out.
//
// Before any of that, a callback is held to its provider's Limits (query string, body
// bytes, form fields), so that an unauthenticated one costs time linear in a small input:
// the signature check twilio-go does copies the URL once per form field, tens of
// CPU-seconds for 1 MiB of fields behind a long query. An event's own time is taken only
// when plausible (see MaxEventAge), so that no provider puts on a record a time that no
// status can show (year 9999, 1e18 seconds).
//
// A Hook only parses: package rest answers the HTTP request and the store applies the
// events (store.Store.ApplyProviderEvent, monotonic and provider-guarded).
package providerhook
