package store

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
)

// CatChunk is catChunk, for the tests of package store_test that cross it.
const CatChunk = catChunk

// UserProfileKey is the key of v's PROFILE item, for the tests of package store_test
// that read it as stored.
func UserProfileKey(v inbox.Viewer) map[string]types.AttributeValue {
	return itemKey{userPK(v), skUserProfile}.av()
}

// StatusPK is the partition of notification id's status records, for the tests of
// package store_test that read them as stored.
func StatusPK(tenantID, id string) string { return notifStatusPK(tenantID, id) }
