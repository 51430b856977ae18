package relay

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/lease"
)

// entityLease is the entityType of the relay's lease item (key store.RelayLeaseKey).
const entityLease = "RelayLease"

// attrEntityType is the entityType attribute of the relay's state and checkpoint items.
const attrEntityType = lease.AttrEntityType

// errLeaseLost reports that another relay holds the lease now.
var errLeaseLost = lease.ErrLost

func ms(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// Release gives the lease up (when this relay holds it), so that a successor need not
// wait for it to expire. Call it after Run returned, on a graceful shutdown.
func (r *Relay) Release(ctx context.Context) error { return r.lease.Release(ctx) }
