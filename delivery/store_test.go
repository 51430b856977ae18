package delivery_test

import (
	"github.com/inboxgw/gateway/delivery"
	"github.com/inboxgw/gateway/store"
)

// The store implements what the handler needs (the handler itself imports no store).
var _ delivery.Store = (*store.Store)(nil)
